package rocketmq.compat.driver;

import java.nio.charset.StandardCharsets;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Child-JVM driver: sync-sends N messages (keys, tags, bodies derived from the index) to a topic found
 * through the name server, then consumes them with a push consumer until all N distinct messages
 * arrived or the deadline passed.
 *
 * <p>Compiled against the 4.9.7 client API, run against 4.9.7 or 5.x clients (same API).
 * Usage: {@code ProduceConsumeDriver <namesrvAddr> <topic> <count> <consumeTimeoutSeconds>}.
 * Prints one line {@code RESULT ...} and exits 0 only if every message arrived intact.
 */
public final class ProduceConsumeDriver {

    private ProduceConsumeDriver() {
    }

    /** Body of message {@code index} of run {@code runId}: text plus padding, about 200 bytes. */
    static String body(String runId, int index) {
        StringBuilder sb = new StringBuilder("compat message ").append(index).append(" of run ").append(runId).append(' ');
        while (sb.length() < 200) {
            sb.append((char) ('a' + (index + sb.length()) % 26));
        }
        return sb.toString();
    }

    static String tag(int index) {
        return index % 2 == 0 ? "TagEven" : "TagOdd";
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 4) {
            System.err.println("usage: ProduceConsumeDriver <namesrvAddr> <topic> <count> <consumeTimeoutSeconds>");
            System.exit(2);
        }
        String namesrv = args[0];
        String topic = args[1];
        int count = Integer.parseInt(args[2]);
        long consumeTimeoutMillis = Long.parseLong(args[3]) * 1000L;
        String runId = UUID.randomUUID().toString().substring(0, 8);

        System.out.printf("CLIENT version=%s serializeType=%s run=%s%n",
            MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION),
            System.getProperty("rocketmq.serialize.type", "JSON(default)"), runId);

        int sent = produce(namesrv, topic, count, runId);
        System.out.printf("PRODUCED %d%n", sent);

        Map<String, AtomicInteger> seen = new ConcurrentHashMap<>();
        AtomicInteger bad = new AtomicInteger();
        StringBuffer firstBad = new StringBuffer();
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("compat_consumer_" + runId);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("driver-consumer-" + runId);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPollNameServerInterval(1000);
        consumer.setConsumeThreadMin(4);
        consumer.setConsumeThreadMax(4);
        consumer.subscribe(topic, "TagEven || TagOdd");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt msg : msgs) {
                String key = msg.getKeys();
                String problem = check(runId, msg);
                if (problem != null) {
                    if (bad.getAndIncrement() == 0) {
                        firstBad.append(problem);
                    }
                    continue;
                }
                seen.computeIfAbsent(key, k -> new AtomicInteger()).incrementAndGet();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        long start = System.currentTimeMillis();
        consumer.start();
        long deadline = start + consumeTimeoutMillis;
        try {
            while (seen.size() < count && System.currentTimeMillis() < deadline) {
                Thread.sleep(100);
            }
        } finally {
            consumer.shutdown();
        }
        int duplicates = seen.values().stream().mapToInt(AtomicInteger::get).sum() - seen.size();
        boolean ok = sent == count && seen.size() == count && bad.get() == 0;
        System.out.printf("RESULT status=%s sent=%d received=%d duplicates=%d bad=%d consumeMillis=%d%s%n",
            ok ? "OK" : "FAILED", sent, seen.size(), duplicates, bad.get(), System.currentTimeMillis() - start,
            firstBad.length() > 0 ? " firstBad=" + firstBad : "");
        System.exit(ok ? 0 : 1);
    }

    private static int produce(String namesrv, String topic, int count, String runId) throws Exception {
        DefaultMQProducer producer = FeatureDriver.newProducer(namesrv, "compat_producer_" + runId, "driver-producer-" + runId);
        producer.start();
        int ok = 0;
        try {
            for (int i = 0; i < count; i++) {
                Message msg = new Message(topic, tag(i), runId + "-" + i, body(runId, i).getBytes(StandardCharsets.UTF_8));
                SendResult result = producer.send(msg);
                if (result.getSendStatus() == SendStatus.SEND_OK) {
                    ok++;
                } else {
                    System.out.printf("SEND %d status=%s%n", i, result.getSendStatus());
                }
            }
        } finally {
            producer.shutdown();
        }
        return ok;
    }

    /** Returns null if the message is one this run sent, with the body and tag its key implies. */
    private static String check(String runId, MessageExt msg) {
        String key = msg.getKeys();
        String prefix = runId + "-";
        if (key == null || !key.startsWith(prefix)) {
            return "unexpected key " + key + " msgId=" + msg.getMsgId();
        }
        int index;
        try {
            index = Integer.parseInt(key.substring(prefix.length()));
        } catch (NumberFormatException e) {
            return "unparsable key " + key;
        }
        String bodyText = new String(msg.getBody(), StandardCharsets.UTF_8);
        if (!body(runId, index).equals(bodyText)) {
            return "wrong body for " + key + ": " + bodyText;
        }
        if (!tag(index).equals(msg.getTags())) {
            return "wrong tag for " + key + ": " + msg.getTags();
        }
        return null;
    }
}
