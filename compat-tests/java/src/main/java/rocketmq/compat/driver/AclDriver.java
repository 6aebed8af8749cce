package rocketmq.compat.driver;

import java.nio.charset.StandardCharsets;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * Java clients signing with {@code AclClientRPCHook} (run on a rocketmq-tools classpath, which has rocketmq-acl).
 *
 * <p>Usage: {@code AclDriver <namesrvAddr> <accessKey|-> <secretKey|-> <step>}; {@code -} sends no credentials.
 * <ul>
 *   <li>{@code send:TOPIC:COUNT} sync sends; prints {@code SENT n}, or {@code SEND_FAILED <message>} at the first
 *       failure.
 *   <li>{@code consume:TOPIC:GROUP:COUNT:SECONDS} a push consumer from the first offset until COUNT messages
 *       arrived or SECONDS passed; prints {@code CONSUMED n}.
 * </ul>
 */
public final class AclDriver {
    private AclDriver() {
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        RPCHook hook = args[1].equals("-") ? null : new AclClientRPCHook(new SessionCredentials(args[1], args[2]));
        String[] step = args[3].split(":");
        String run = Long.toString(System.nanoTime());
        switch (step[0]) {
            case "send" -> send(namesrv, hook, step[1], Integer.parseInt(step[2]), run);
            case "consume" -> consume(namesrv, hook, step[1], step[2], Integer.parseInt(step[3]), Integer.parseInt(step[4]), run);
            default -> throw new IllegalArgumentException("unknown step " + step[0]);
        }
        System.out.flush();
        System.exit(0);
    }

    private static void send(String namesrv, RPCHook hook, String topic, int count, String run) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("acl_producer_" + run, hook);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("acl-" + run);
        producer.setSendMsgTimeout(10_000);
        // The first route query also pays for the JVM opening its first connection, seconds on a loaded machine.
        producer.setMqClientApiTimeout(10_000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        int sent = 0;
        try {
            for (int i = 0; i < count; i++) {
                SendResult r = producer.send(new Message(topic, ("acl-" + i).getBytes(StandardCharsets.UTF_8)));
                if (r.getSendStatus() != SendStatus.SEND_OK) {
                    System.out.println("SEND_FAILED status " + r.getSendStatus());
                    return;
                }
                sent++;
            }
            System.out.println("SENT " + sent);
        } catch (Exception e) {
            Throwable root = e;
            StringBuilder all = new StringBuilder();
            while (root != null) {
                all.append(root.getMessage()).append(" | ");
                root = root.getCause();
            }
            System.out.println("SEND_FAILED " + all.toString().replace('\n', ' '));
        } finally {
            producer.shutdown();
        }
    }

    private static void consume(String namesrv, RPCHook hook, String topic, String group, int count, int seconds, String run)
        throws Exception {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group, hook, new AllocateMessageQueueAveragely());
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("acl-" + run);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        ConcurrentHashMap<String, Boolean> seen = new ConcurrentHashMap<>();
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            msgs.forEach(m -> seen.put(m.getMsgId(), true));
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(seconds);
        while (seen.size() < count && System.nanoTime() < deadline) {
            Thread.sleep(100);
        }
        System.out.println("CONSUMED " + seen.size());
        consumer.shutdown();
    }
}
