package rocketmq.compat.driver;

import static rocketmq.compat.driver.Steps.check;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.RequestCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Child-JVM driver for request-reply and message trace, compiled against the 4.9.7 client API and run with
 * a 4.9.7 or 5.x client classpath. Usage: {@code ReplyTraceDriver <namesrvAddr> <step> [<step> ...]}:
 *
 * <ul>
 *   <li>{@code replier:TOPIC:GROUP:SECONDS} a push consumer of TOPIC answers every request with
 *       {@code MessageUtil.createReplyMessage} (body "reply:" + the request's body) through its own
 *       producer; prints {@code READY} once subscribed and {@code REPLIED <correlation id> <status>} per
 *       reply; runs for SECONDS.
 *   <li>{@code request:TOPIC:COUNT} a producer's synchronous {@code request(msg, 10 s)} COUNT times; each
 *       answer must be the replier's body for that request.
 *   <li>{@code requestAsync:TOPIC:COUNT} the same with a RequestCallback; reports what the callbacks got.
 *   <li>{@code replyToNobody:CLUSTER} a reply for a client that is not connected is refused by the broker
 *       with SYSTEM_ERROR (1) and Java's remark.
 *   <li>{@code traceProduce:TOPIC:GROUP:COUNT} a producer with message trace sends COUNT messages; prints
 *       {@code TRACED <msgId> <key>}; shuts down (which flushes the trace records).
 *   <li>{@code traceConsume:TOPIC:GROUP:COUNT} a push consumer with message trace consumes COUNT messages,
 *       then waits for its trace records to be sent and shuts down.
 * </ul>
 */
public final class ReplyTraceDriver {
    private static final long REQUEST_TIMEOUT_MS = 10_000;

    private final String namesrv;
    private final String runId = UUID.randomUUID().toString().substring(0, 8);
    private final AtomicInteger instances = new AtomicInteger();

    private ReplyTraceDriver(String namesrv) {
        this.namesrv = namesrv;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: ReplyTraceDriver <namesrvAddr> <step> [<step> ...]");
            System.exit(2);
        }
        ReplyTraceDriver driver = new ReplyTraceDriver(args[0]);
        Steps.printClient(driver.runId);
        boolean allOk = true;
        for (String step : Arrays.asList(args).subList(1, args.length)) {
            String[] s = step.split(":");
            allOk &= Steps.report(s[0], facts -> driver.run(s, facts));
        }
        System.out.flush();
        System.exit(allOk ? 0 : 1);
    }

    private void run(String[] s, Map<String, Object> facts) throws Exception {
        switch (s[0]) {
            case "replier" -> replier(s[1], s[2], Integer.parseInt(s[3]), facts);
            case "request" -> request(s[1], Integer.parseInt(s[2]), facts);
            case "requestAsync" -> requestAsync(s[1], Integer.parseInt(s[2]), facts);
            case "replyToNobody" -> replyToNobody(s[1], facts);
            case "traceProduce" -> traceProduce(s[1], s[2], Integer.parseInt(s[3]), facts);
            case "traceConsume" -> traceConsume(s[1], s[2], Integer.parseInt(s[3]), facts);
            default -> throw new Steps.Failure("unknown step " + s[0]);
        }
    }

    private String instance(String what) {
        return what + "-" + runId + "-" + instances.incrementAndGet();
    }

    private DefaultMQProducer producer(DefaultMQProducer producer, String what) {
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName(instance(what));
        producer.setSendMsgTimeout(10_000);
        // The first route query also pays for the JVM opening its first connection, seconds on a loaded machine.
        producer.setMqClientApiTimeout(10_000);
        return producer;
    }

    private DefaultMQPushConsumer consumer(DefaultMQPushConsumer consumer, String what) {
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(instance(what));
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPollNameServerInterval(1000);
        consumer.setHeartbeatBrokerInterval(5000);
        consumer.setConsumeThreadMin(2);
        consumer.setConsumeThreadMax(4);
        return consumer;
    }

    private static String text(byte[] body) {
        return new String(body, StandardCharsets.UTF_8);
    }

    // ------------------------------------------------------------------------------------------------
    // request-reply

    private void replier(String topic, String group, int seconds, Map<String, Object> facts) throws Exception {
        DefaultMQProducer replyProducer = producer(new DefaultMQProducer(group + "_reply"), "replier-producer");
        replyProducer.start();
        DefaultMQPushConsumer consumer = consumer(new DefaultMQPushConsumer(group), "replier");
        AtomicInteger replied = new AtomicInteger();
        AtomicInteger failed = new AtomicInteger();
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt msg : msgs) {
                try {
                    Message reply = MessageUtil.createReplyMessage(msg, ("reply:" + text(msg.getBody())).getBytes(StandardCharsets.UTF_8));
                    SendResult r = replyProducer.send(reply, 10_000);
                    replied.incrementAndGet();
                    System.out.printf("REPLIED %s %s%n", msg.getProperty("CORRELATION_ID"), r.getSendStatus());
                } catch (Exception e) {
                    failed.incrementAndGet();
                    System.out.printf("REPLYFAILED %s %s%n", msg.getProperty("CORRELATION_ID"), e.toString().replace('\n', ' '));
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        System.out.println("READY");
        System.out.flush();
        try {
            Thread.sleep(seconds * 1000L);
        } finally {
            consumer.shutdown();
            replyProducer.shutdown();
        }
        facts.put("replied", replied.get());
        facts.put("failed", failed.get());
        check(replied.get() > 0, "no request arrived to reply to");
        check(failed.get() == 0, failed.get() + " replies failed");
    }

    private DefaultMQProducer requester() throws Exception {
        DefaultMQProducer producer = producer(new DefaultMQProducer("requester_" + runId), "requester");
        producer.start();
        return producer;
    }

    private void request(String topic, int count, Map<String, Object> facts) throws Exception {
        DefaultMQProducer producer = requester();
        int ok = 0;
        List<String> wrong = new ArrayList<>();
        try {
            for (int i = 0; i < count; i++) {
                String body = "req-" + runId + "-" + i;
                long start = System.currentTimeMillis();
                Message reply = producer.request(new Message(topic, body.getBytes(StandardCharsets.UTF_8)), REQUEST_TIMEOUT_MS);
                String got = reply == null ? null : text(reply.getBody());
                System.out.printf("REPLY %s %s %dms%n", body, got, System.currentTimeMillis() - start);
                if (("reply:" + body).equals(got)) {
                    ok++;
                } else {
                    wrong.add(body + "->" + got);
                }
            }
        } finally {
            producer.shutdown();
        }
        facts.put("replies", ok);
        check(ok == count, ok + " of " + count + " requests got their reply; wrong: " + wrong);
    }

    /**
     * The callback form. Java clients 4.9.7 and 5.3.3 call {@code onSuccess(null)} once the request is sent
     * (against Java's broker too), then {@code onSuccess(reply)} when the reply arrives: the step waits for
     * every right reply and counts the null calls as a fact.
     */
    private void requestAsync(String topic, int count, Map<String, Object> facts) throws Exception {
        DefaultMQProducer producer = requester();
        Set<String> right = ConcurrentHashMap.newKeySet();
        AtomicInteger nulls = new AtomicInteger();
        List<String> other = java.util.Collections.synchronizedList(new ArrayList<>());
        try {
            for (int i = 0; i < count; i++) {
                String body = "async-" + runId + "-" + i;
                producer.request(new Message(topic, body.getBytes(StandardCharsets.UTF_8)), new RequestCallback() {
                    @Override
                    public void onSuccess(Message reply) {
                        String got = reply == null ? null : text(reply.getBody());
                        if (got == null) {
                            nulls.incrementAndGet();
                        } else if (("reply:" + body).equals(got)) {
                            right.add(body);
                        } else {
                            other.add(body + "->" + got);
                        }
                    }

                    @Override
                    public void onException(Throwable e) {
                        other.add(body + "->" + e.getClass().getSimpleName());
                    }
                }, REQUEST_TIMEOUT_MS);
            }
            long deadline = System.currentTimeMillis() + REQUEST_TIMEOUT_MS + 5000;
            while (right.size() < count && other.isEmpty() && System.currentTimeMillis() < deadline) {
                Thread.sleep(50);
            }
        } finally {
            producer.shutdown();
        }
        facts.put("replies", right.size());
        facts.put("nullCallbacks", nulls.get());
        check(right.size() == count && other.isEmpty(), right.size() + " of " + count + " callbacks got their reply; others: " + other);
    }

    private void replyToNobody(String cluster, Map<String, Object> facts) throws Exception {
        DefaultMQProducer producer = producer(new DefaultMQProducer("nobody_replier_" + runId), "nobody-replier");
        producer.start();
        try {
            Message reply = new Message(cluster + "_REPLY_TOPIC", "orphan".getBytes(StandardCharsets.UTF_8));
            // What MessageUtil.createReplyMessage sets, for a requester that never connected.
            MessageAccessor.putProperty(reply, "MSG_TYPE", "reply");
            MessageAccessor.putProperty(reply, "CORRELATION_ID", "no-such-request");
            MessageAccessor.putProperty(reply, "REPLY_TO_CLIENT", "127.0.0.1@nobody");
            MessageAccessor.putProperty(reply, "TTL", "3000");
            AtomicReference<MQBrokerException> refused = new AtomicReference<>();
            try {
                SendResult r = producer.send(reply, 10_000);
                facts.put("status", r.getSendStatus());
            } catch (MQBrokerException e) {
                refused.set(e);
            } catch (MQClientException e) {
                // SYSTEM_ERROR is one of the codes the client retries; it then wraps the last refusal.
                for (Throwable t = e; t != null; t = t.getCause()) {
                    if (t instanceof MQBrokerException b) {
                        refused.set(b);
                        break;
                    }
                }
                if (refused.get() == null) {
                    throw e;
                }
            }
            check(refused.get() != null, "the broker accepted a reply for a client that is not connected");
            facts.put("code", refused.get().getResponseCode());
            facts.put("remark", refused.get().getErrorMessage());
            check(refused.get().getResponseCode() == 1, "code " + refused.get().getResponseCode() + ", expected 1");
            check(String.valueOf(refused.get().getErrorMessage()).contains("push reply message fail, channel of <127.0.0.1@nobody> not found."),
                "remark: " + refused.get().getErrorMessage());
        } finally {
            producer.shutdown();
        }
    }

    // ------------------------------------------------------------------------------------------------
    // message trace

    private void traceProduce(String topic, String group, int count, Map<String, Object> facts) throws Exception {
        DefaultMQProducer producer = producer(new DefaultMQProducer(group, true, null), "trace-producer");
        producer.start();
        int ok = 0;
        try {
            for (int i = 0; i < count; i++) {
                String key = "trace-" + runId + "-" + i;
                SendResult r = producer.send(new Message(topic, "TagT", key, key.getBytes(StandardCharsets.UTF_8)));
                if (r.getSendStatus() == SendStatus.SEND_OK) {
                    ok++;
                    System.out.printf("TRACED %s %s%n", r.getMsgId(), key);
                }
            }
            // The trace dispatcher sends its batch within a second or so; shutdown flushes what is left.
            Thread.sleep(2000);
        } finally {
            producer.shutdown();
        }
        facts.put("sent", ok);
        check(ok == count, ok + " of " + count + " sends returned SEND_OK");
    }

    private void traceConsume(String topic, String group, int count, Map<String, Object> facts) throws Exception {
        DefaultMQPushConsumer consumer = consumer(new DefaultMQPushConsumer(group, true, null), "trace-consumer");
        Set<String> keys = ConcurrentHashMap.newKeySet();
        CountDownLatch all = new CountDownLatch(count);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt msg : msgs) {
                if (keys.add(msg.getKeys())) {
                    System.out.printf("CONSUMED %s %s region=%s traceOn=%s%n", msg.getMsgId(), msg.getKeys(),
                        msg.getProperty("MSG_REGION"), msg.getProperty("TRACE_ON"));
                    all.countDown();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        boolean complete;
        try {
            complete = all.await(60, TimeUnit.SECONDS);
            Thread.sleep(3000);
        } finally {
            consumer.shutdown();
        }
        facts.put("consumed", keys.size());
        check(complete, keys.size() + " of " + count + " messages arrived within 60 s");
    }
}
