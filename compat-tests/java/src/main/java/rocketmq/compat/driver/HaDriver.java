package rocketmq.compat.driver;

import static rocketmq.compat.driver.Steps.check;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import rocketmq.compat.driver.Steps.Failure;

/**
 * Child-JVM driver for the master/slave tests, compiled against the 4.9.7 client API and run with a 4.9.7
 * or 5.x client classpath. Usage: {@code HaDriver <namesrvAddr> <step> [<step> ...]}, a step being
 * {@code name:arg:arg...}:
 *
 * <ul>
 *   <li>{@code warm:TOPIC:SECONDS} sync sends (keys {@code warm-i}) until one is SEND_OK: on a SYNC_MASTER that
 *       means a slave is connected and acknowledging. Prints {@code WARM key status} for each.
 *   <li>{@code produce:TOPIC:PREFIX:COUNT:THREADS:PACE_MS:STOPFILE:STRICT} COUNT sync sends (keys PREFIX-i, bodies
 *       from the key) from THREADS threads, each pausing PACE_MS after a send; stops early once the file
 *       STOPFILE exists ({@code -}: never). Prints {@code OK key queueId queueOffset brokerName storeHost} for each
 *       SEND_OK, {@code NOTOK key status brokerName storeHost} for another status and {@code FAIL key exception} for a send that
 *       threw. STRICT {@code true}: the step fails unless all COUNT were SEND_OK. An optional 9th field is the
 *       send timeout in ms (default 5,000).
 *   <li>{@code consume:TOPIC:GROUP:PREFIX:COUNT:SECONDS} a push consumer until PREFIX-0 .. PREFIX-(COUNT-1) all
 *       arrived, intact; prints only the summary.
 *   <li>{@code consumeLive:TOPIC:GROUP:STOPFILE:SECONDS[:PAUSEFILE]} a push consumer that prints
 *       {@code GOT key queueId queueOffset brokerName storeHost} for every delivery as it comes, until STOPFILE exists;
 *       with PAUSEFILE it consumes on one thread, caches at most 16 messages per queue, and stops consuming while
 *       PAUSEFILE exists, so that what it has not consumed stays on the broker.
 * </ul>
 *
 * Each step prints its {@code RESULT} line ({@link Steps}); the process exits 0 only if every step is OK.
 */
public final class HaDriver {
    private final String namesrv;
    private final String runId = UUID.randomUUID().toString().substring(0, 8);
    private final AtomicInteger instances = new AtomicInteger();

    private HaDriver(String namesrv) {
        this.namesrv = namesrv;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: HaDriver <namesrvAddr> <step> [<step> ...]");
            System.exit(2);
        }
        HaDriver driver = new HaDriver(args[0]);
        Steps.printClient(driver.runId);
        boolean allOk = true;
        for (String step : Arrays.asList(args).subList(1, args.length)) {
            allOk &= driver.run(step.split(":"));
        }
        System.out.flush();
        System.exit(allOk ? 0 : 1);
    }

    private boolean run(String[] step) {
        String name = step[0];
        return Steps.report(name, facts -> {
            switch (name) {
                case "warm" -> warm(step[1], Integer.parseInt(step[2]), facts);
                case "produce" -> produce(step[1], step[2], Integer.parseInt(step[3]), Integer.parseInt(step[4]),
                    Long.parseLong(step[5]), step[6], Boolean.parseBoolean(step[7]),
                    step.length > 8 ? Integer.parseInt(step[8]) : SEND_TIMEOUT_MS, facts);
                case "consume" -> consume(step[1], step[2], step[3], Integer.parseInt(step[4]), Integer.parseInt(step[5]), facts);
                case "consumeLive" -> consumeLive(step[1], step[2], step[3], Integer.parseInt(step[4]),
                    step.length > 5 ? step[5] : null, facts);
                default -> throw new Failure("unknown step " + name);
            }
        });
    }

    /** The body of the message with key {@code key}: the key repeated to 300 bytes. */
    public static byte[] body(String key) {
        StringBuilder sb = new StringBuilder();
        while (sb.length() < 300) {
            sb.append(key).append(' ');
        }
        return sb.substring(0, 300).getBytes(StandardCharsets.UTF_8);
    }

    private String instance(String what) {
        return what + "-" + runId + "-" + instances.incrementAndGet();
    }

    /** The producers' send timeout unless a produce step names one. */
    private static final int SEND_TIMEOUT_MS = 5000;

    private DefaultMQProducer producer() {
        DefaultMQProducer producer = FeatureDriver.newProducer(namesrv, "ha_producer_" + runId, instance("producer"));
        // The route must follow a master that goes away and comes back within a second or so.
        producer.setPollNameServerInterval(1000);
        producer.setSendMsgTimeout(SEND_TIMEOUT_MS);
        return producer;
    }

    private void warm(String topic, int seconds, Map<String, Object> facts) throws Exception {
        DefaultMQProducer producer = producer();
        producer.start();
        long deadline = System.currentTimeMillis() + seconds * 1000L;
        int attempts = 0;
        Map<String, Integer> statuses = new TreeMap<>();
        try {
            while (System.currentTimeMillis() < deadline) {
                String key = "warm-" + attempts++;
                String status;
                try {
                    SendResult r = producer.send(new Message(topic, "TagWarm", key, body(key)));
                    status = r.getSendStatus().name();
                } catch (Exception e) {
                    status = e.getClass().getSimpleName();
                }
                statuses.merge(status, 1, Integer::sum);
                System.out.printf("WARM %s %s%n", key, status);
                if (status.equals("SEND_OK")) {
                    facts.put("attempts", attempts);
                    facts.put("statuses", statuses);
                    return;
                }
                Thread.sleep(200);
            }
        } finally {
            producer.shutdown();
        }
        facts.put("statuses", statuses);
        throw new Failure("no SEND_OK within " + seconds + " s after " + attempts + " sends: " + statuses);
    }

    private void produce(String topic, String prefix, int count, int threads, long paceMs, String stopFile,
                         boolean strict, int timeoutMs, Map<String, Object> facts) throws Exception {
        DefaultMQProducer producer = producer();
        producer.setSendMsgTimeout(timeoutMs);
        producer.start();
        AtomicInteger next = new AtomicInteger();
        AtomicInteger ok = new AtomicInteger();
        Map<String, AtomicInteger> statuses = new ConcurrentHashMap<>();
        Path stop = stopFile.equals("-") ? null : Path.of(stopFile);
        long start = System.currentTimeMillis();
        Thread[] workers = new Thread[threads];
        try {
            for (int t = 0; t < threads; t++) {
                workers[t] = new Thread(() -> {
                    for (int i = next.getAndIncrement(); i < count; i = next.getAndIncrement()) {
                        if (stop != null && Files.exists(stop)) {
                            return;
                        }
                        String key = prefix + "-" + i;
                        String status;
                        boolean threw = false;
                        try {
                            SendResult r = producer.send(new Message(topic, "TagHA", key, body(key)));
                            status = r.getSendStatus().name();
                            if (r.getSendStatus() == SendStatus.SEND_OK) {
                                ok.incrementAndGet();
                                System.out.printf("OK %s %d %d %s %s%n", key, r.getMessageQueue().getQueueId(),
                                    r.getQueueOffset(), r.getMessageQueue().getBrokerName(), storeHost(r));
                            } else {
                                // which group answered: the test holds ours strictly to SEND_OK
                                System.out.printf("NOTOK %s %s %s %s%n", key, status, r.getMessageQueue().getBrokerName(), storeHost(r));
                            }
                        } catch (Exception e) {
                            threw = true;
                            status = e.getClass().getSimpleName();
                            String why = e.getMessage() + (e.getCause() == null ? "" : " cause: " + e.getCause());
                            System.out.printf("FAIL %s %s%n", key, why.replace('\n', ' '));
                        }
                        statuses.computeIfAbsent(status, s -> new AtomicInteger()).incrementAndGet();
                        try {
                            // after a failure, do not spin while the broker is away
                            long pause = threw ? Math.max(paceMs, 200) : paceMs;
                            if (pause > 0) {
                                Thread.sleep(pause);
                            }
                        } catch (InterruptedException e) {
                            return;
                        }
                    }
                }, "producer-" + t);
                workers[t].start();
            }
            for (Thread w : workers) {
                w.join();
            }
        } finally {
            producer.shutdown();
        }
        facts.put("sendOk", ok.get());
        facts.put("statuses", new TreeMap<>(statuses));
        facts.put("sendMillis", System.currentTimeMillis() - start);
        if (strict) {
            check(ok.get() == count, ok.get() + " of " + count + " sends were SEND_OK: " + new TreeMap<>(statuses));
        }
    }

    /** The broker address the send result's offset message id names (the broker that stored it), or "-". */
    static String storeHost(SendResult r) {
        try {
            return String.valueOf(MessageDecoder.decodeMessageId(r.getOffsetMsgId()).getAddress()).replace("/", "");
        } catch (Exception e) {
            return "-";
        }
    }

    private DefaultMQPushConsumer consumer(String group, String topic, MessageListenerConcurrently listener) throws Exception {
        return consumer(group, topic, listener, false);
    }

    /** {@code slow}: one consume thread and at most 16 messages cached per queue, so that the backlog stays on the broker. */
    private DefaultMQPushConsumer consumer(String group, String topic, MessageListenerConcurrently listener, boolean slow)
        throws Exception {
        // The 5.x client gives up at start when its first route query fails (a name server
        // connection reset on a busy machine); these tests are about replication, so start again.
        for (int attempt = 1; ; attempt++) {
            DefaultMQPushConsumer consumer = FeatureDriver.newPushConsumer(namesrv, group, instance("consumer"));
            consumer.setConsumeThreadMin(slow ? 1 : 4);
            consumer.setConsumeThreadMax(slow ? 1 : 4);
            if (slow) {
                consumer.setPullThresholdForQueue(16);
                consumer.setPullBatchSize(8);
            }
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener(listener);
            try {
                consumer.start();
                return consumer;
            } catch (IllegalStateException e) {
                consumer.shutdown();
                if (attempt == 3) {
                    throw e;
                }
                System.out.println("consumer start failed (" + e.getMessage() + "); starting again");
                Thread.sleep(1_000);
            }
        }
    }

    private void consume(String topic, String group, String prefix, int count, int seconds, Map<String, Object> facts)
        throws Exception {
        Set<String> seen = ConcurrentHashMap.newKeySet();
        AtomicLong deliveries = new AtomicLong();
        AtomicInteger bad = new AtomicInteger();
        StringBuffer firstBad = new StringBuffer();
        DefaultMQPushConsumer consumer = consumer(group, topic, (msgs, context) -> {
            for (MessageExt m : msgs) {
                deliveries.incrementAndGet();
                String key = m.getKeys();
                if (key == null || !key.startsWith(prefix + "-")) {
                    continue;
                }
                if (!Arrays.equals(m.getBody(), body(key))) {
                    if (bad.getAndIncrement() == 0) {
                        firstBad.append(key).append(" at ").append(m.getQueueId()).append(':').append(m.getQueueOffset());
                    }
                    continue;
                }
                seen.add(key);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        long start = System.currentTimeMillis();
        long deadline = start + seconds * 1000L;
        try {
            while (seen.size() < count && System.currentTimeMillis() < deadline) {
                Thread.sleep(100);
            }
        } finally {
            consumer.shutdown();
        }
        facts.put("received", seen.size());
        facts.put("deliveries", deliveries.get());
        facts.put("bad", bad.get());
        facts.put("consumeMillis", System.currentTimeMillis() - start);
        check(bad.get() == 0, bad.get() + " messages with a wrong body, the first " + firstBad);
        if (seen.size() < count) {
            StringBuilder missing = new StringBuilder();
            for (int i = 0, n = 0; i < count && n < 10; i++) {
                if (!seen.contains(prefix + "-" + i)) {
                    missing.append(prefix).append('-').append(i).append(' ');
                    n++;
                }
            }
            throw new Failure(seen.size() + " of " + count + " messages arrived within " + seconds + " s; missing e.g. " + missing);
        }
    }

    private void consumeLive(String topic, String group, String stopFile, int seconds, String pauseFile, Map<String, Object> facts)
        throws Exception {
        Path pause = pauseFile == null ? null : Path.of(pauseFile);
        AtomicLong deliveries = new AtomicLong();
        AtomicInteger bad = new AtomicInteger();
        DefaultMQPushConsumer consumer = consumer(group, topic, (msgs, context) -> {
            for (MessageExt m : msgs) {
                deliveries.incrementAndGet();
                String key = m.getKeys();
                boolean intact = key != null && Arrays.equals(m.getBody(), body(key));
                if (!intact) {
                    bad.incrementAndGet();
                }
                System.out.printf("%s %s %d %d %s %s%n", intact ? "GOT" : "BAD", key, m.getQueueId(), m.getQueueOffset(),
                    m.getBrokerName(), String.valueOf(m.getStoreHost()).replace("/", ""));
            }
            try {
                while (pause != null && Files.exists(pause)) {
                    Thread.sleep(50);
                }
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        }, pause != null);
        Path stop = Path.of(stopFile);
        long deadline = System.currentTimeMillis() + seconds * 1000L;
        try {
            while (!Files.exists(stop) && System.currentTimeMillis() < deadline) {
                Thread.sleep(100);
            }
        } finally {
            consumer.shutdown();
        }
        facts.put("deliveries", deliveries.get());
        facts.put("bad", bad.get());
        check(Files.exists(stop), "not told to stop within " + seconds + " s");
        check(bad.get() == 0, bad.get() + " deliveries with a wrong body");
    }
}
