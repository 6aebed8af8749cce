package rocketmq.compat.driver;

import static rocketmq.compat.driver.FeatureDriver.firstKey;
import static rocketmq.compat.driver.FeatureDriver.sample;
import static rocketmq.compat.driver.Steps.check;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.Predicate;
import java.util.stream.Collectors;
import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * Child-JVM driver for what the broker does to messages after a send: transactions, delay levels, retry,
 * dead letters and orderly consumption with queue locks. Compiled against the 4.9.7 client API and run with
 * a 4.9.7 or 5.x client classpath. Usage: {@code ReliabilityDriver <namesrvAddr> <step> [<step> ...]}:
 *
 * <ul>
 *   <li>{@code transactions:TOPIC} a TransactionMQProducer sends COMMIT, ROLLBACK and UNKNOW half messages;
 *       the UNKNOW ones are resolved by the broker's check-back (some to commit, some to rollback). A consumer
 *       gets exactly the committed ones; every UNKNOW one is checked back. Needs a broker that checks often
 *       ({@code transactionCheckInterval}, {@code transactionTimeOut} of a second or so).
 *   <li>{@code delay:TOPIC:MS1,MS2,MS3} messages at delay levels 1, 2 and 3 (the broker's messageDelayLevel,
 *       in ms) are stored in their topic, and reach a running consumer, no earlier than their delay and not
 *       much later.
 *   <li>{@code retry:TOPIC:GROUP} a listener that fails three times, then succeeds: four deliveries of each
 *       message (reconsumeTimes 0 to 3) through the group's retry topic, intact, then no more.
 *   <li>{@code dlq:TOPIC:GROUP} a listener that always fails: 1 + 16 (the default maxReconsumeTimes) deliveries,
 *       then the message is in {@code %DLQ%GROUP}, found by key through the client's admin API.
 *   <li>{@code orderly:TOPIC:GROUP} two orderly consumers hold locked queues; every order's messages arrive in
 *       send order; a third consumer joins, the queues move (unlock, lock), and the order holds.
 * </ul>
 *
 * Each step prints its {@code RESULT} line ({@link Steps}); the process exits 0 only if every step is OK.
 */
public final class ReliabilityDriver {
    private static final long TIMEOUT_MS = 90_000;
    /** Deliveries of a message whose listener always fails: the first and 16 retries (client default). */
    private static final int DLQ_DELIVERIES = 17;

    private final String namesrv;
    private final String runId = UUID.randomUUID().toString().substring(0, 8);
    private final AtomicInteger instances = new AtomicInteger();

    private ReliabilityDriver(String namesrv) {
        this.namesrv = namesrv;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: ReliabilityDriver <namesrvAddr> <step> [<step> ...]");
            System.exit(2);
        }
        ReliabilityDriver driver = new ReliabilityDriver(args[0]);
        Steps.printClient(driver.runId);
        boolean allOk = true;
        for (String arg : Arrays.asList(args).subList(1, args.length)) {
            String[] step = arg.split(":");
            allOk &= Steps.report(step[0], facts -> {
                switch (step[0]) {
                    case "transactions" -> driver.transactions(step[1], facts);
                    case "delay" -> driver.delay(step[1], Arrays.stream(step[2].split(",")).map(Long::parseLong).toList(), facts);
                    case "retry" -> driver.retry(step[1], step[2], facts);
                    case "dlq" -> driver.dlq(step[1], step[2], facts);
                    case "orderly" -> driver.orderly(step[1], step[2], facts);
                    default -> throw new Steps.Failure("unknown step " + step[0]);
                }
            });
        }
        System.exit(allOk ? 0 : 1);
    }

    private String instance(String what) {
        return what + "-" + runId + "-" + instances.incrementAndGet();
    }

    private DefaultMQProducer producer(String what) throws Exception {
        DefaultMQProducer producer = FeatureDriver.newProducer(namesrv, "reliability_producer_" + what + "_" + runId,
            instance("producer-" + what));
        producer.start();
        return producer;
    }

    private static Message message(String topic, String key, String text) {
        Message msg = new Message(topic, "TagR", key, ("body of " + key + " " + text).getBytes(StandardCharsets.UTF_8));
        msg.putUserProperty("compatKey", key);
        return msg;
    }

    private static String body(MessageExt m) {
        return new String(m.getBody(), StandardCharsets.UTF_8);
    }

    private static void sendOk(DefaultMQProducer producer, Message msg) throws Exception {
        SendResult r = producer.send(msg);
        check(r.getSendStatus() == SendStatus.SEND_OK, "send of " + msg.getKeys() + ": " + r);
    }

    /** Waits up to {@code timeoutMs} for {@code done}; false if it never held. */
    private static boolean await(java.util.function.BooleanSupplier done, long timeoutMs) throws InterruptedException {
        long deadline = System.currentTimeMillis() + timeoutMs;
        while (!done.getAsBoolean()) {
            if (System.currentTimeMillis() > deadline) {
                return false;
            }
            Thread.sleep(50);
        }
        return true;
    }

    // ------------------------------------------------------------------------------------------------
    // transactions

    private void transactions(String topic, Map<String, Object> facts) throws Exception {
        final int perKind = 5;
        List<String> kinds = List.of("commit", "rollback", "unknownCommit", "unknownRollback");
        Map<String, AtomicInteger> checks = new ConcurrentHashMap<>();
        TransactionMQProducer producer = new TransactionMQProducer("reliability_tx_producer_" + runId);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName(instance("tx-producer"));
        producer.setSendMsgTimeout(10_000);
        // The first route query also pays for the JVM opening its first connection, seconds on a loaded machine.
        producer.setMqClientApiTimeout(10_000);
        producer.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return switch (msg.getUserProperty("txKind")) {
                    case "commit" -> LocalTransactionState.COMMIT_MESSAGE;
                    case "rollback" -> LocalTransactionState.ROLLBACK_MESSAGE;
                    default -> LocalTransactionState.UNKNOW;
                };
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                checks.computeIfAbsent(firstKey(msg), k -> new AtomicInteger()).incrementAndGet();
                return switch (msg.getUserProperty("txKind")) {
                    case "unknownCommit" -> LocalTransactionState.COMMIT_MESSAGE;
                    case "unknownRollback" -> LocalTransactionState.ROLLBACK_MESSAGE;
                    default -> LocalTransactionState.UNKNOW;
                };
            }
        });
        producer.start();
        FeatureDriver.Deliveries got = new FeatureDriver.Deliveries();
        DefaultMQPushConsumer consumer = null;
        try {
            for (String kind : kinds) {
                for (int i = 0; i < perKind; i++) {
                    Message msg = message(topic, runId + "-" + kind + "-" + i, kind);
                    msg.putUserProperty("txKind", kind);
                    TransactionSendResult r = producer.sendMessageInTransaction(msg, null);
                    check(r.getSendStatus() == SendStatus.SEND_OK, "half message " + msg.getKeys() + ": " + r);
                    LocalTransactionState want = switch (kind) {
                        case "commit" -> LocalTransactionState.COMMIT_MESSAGE;
                        case "rollback" -> LocalTransactionState.ROLLBACK_MESSAGE;
                        default -> LocalTransactionState.UNKNOW;
                    };
                    check(r.getLocalTransactionState() == want, msg.getKeys() + ": local state " + r.getLocalTransactionState());
                }
            }
            consumer = FeatureDriver.newPushConsumer(namesrv, "reliability_tx_consumer_" + runId, instance("tx-consumer"));
            consumer.subscribe(topic, "*");
            FeatureDriver.Deliveries into = got;
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                msgs.forEach(m -> into.add("tx", m));
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
            String prefix = runId + "-";
            Predicate<String> committed = k -> k.startsWith(prefix + "commit-") || k.startsWith(prefix + "unknownCommit-");
            boolean arrived = got.await(committed, 2 * perKind, TIMEOUT_MS, 0);
            // every open transaction has been asked about; then long enough for a wrongly committed one to show
            boolean allChecked = await(() -> kinds.stream().filter(k -> k.startsWith("unknown"))
                .allMatch(k -> checks.keySet().stream().filter(c -> c.startsWith(prefix + k + "-")).count() == perKind), TIMEOUT_MS);
            Thread.sleep(3000);
            Map<String, Integer> counts = got.counts(k -> k.startsWith(prefix));
            facts.put("delivered", counts.size());
            facts.put("checked", checks.size());
            check(arrived, "committed messages not delivered within " + TIMEOUT_MS + " ms: got " + sample(counts.keySet()));
            check(allChecked, "open transactions not all checked back within " + TIMEOUT_MS + " ms: checked " + sample(checks.keySet()));
            Set<String> wrong = counts.keySet().stream().filter(committed.negate()).collect(Collectors.toCollection(TreeSet::new));
            check(wrong.isEmpty(), "rolled back messages were delivered: " + sample(wrong));
            // Java's checker may also ask about transactions already ended (it reads the op records in
            // batches); the listener answers those consistently, so that is not checked here.
            for (FeatureDriver.Deliveries.Delivery d : got.all) {
                MessageExt m = d.msg();
                check(m.getTopic().equals(topic) && body(m).startsWith("body of " + firstKey(m)),
                    "committed message " + m.getKeys() + " arrived as topic " + m.getTopic() + ", body " + body(m));
                check(m.getProperty("REAL_TOPIC") == null, m.getKeys() + " still has REAL_TOPIC: " + m.getProperties());
            }
        } finally {
            if (consumer != null) {
                consumer.shutdown();
            }
            producer.shutdown();
        }
    }

    // ------------------------------------------------------------------------------------------------
    // delay levels

    private void delay(String topic, List<Long> delaysMs, Map<String, Object> facts) throws Exception {
        final int perLevel = 3;
        final long lateMs = 15_000;
        DefaultMQProducer producer = producer("delay");
        FeatureDriver.Deliveries got = new FeatureDriver.Deliveries();
        DefaultMQPushConsumer consumer = FeatureDriver.newPushConsumer(namesrv, "reliability_delay_" + runId, instance("delay"));
        Map<String, SendResult> sent = new TreeMap<>();
        try {
            // the consumer runs before the first delayed message falls due, so arrival times mean something
            sendOk(producer, message(topic, runId + "-warm", "warm"));
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
                msgs.forEach(m -> got.add("delay", m));
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
            check(got.await(k -> k.equals(runId + "-warm"), 1, TIMEOUT_MS, 0), "the warm-up message did not arrive");
            for (int level = 1; level <= delaysMs.size(); level++) {
                for (int i = 0; i < perLevel; i++) {
                    String key = runId + "-L" + level + "-" + i;
                    Message msg = message(topic, key, "level " + level);
                    msg.setDelayTimeLevel(level);
                    SendResult r = producer.send(msg);
                    check(r.getSendStatus() == SendStatus.SEND_OK, "send of " + key + ": " + r);
                    sent.put(key, r);
                }
            }
            long maxDelay = delaysMs.stream().mapToLong(Long::longValue).max().orElse(0);
            boolean arrived = got.await(k -> k.contains("-L"), sent.size(), maxDelay + lateMs + 10_000, 1000);
            Map<String, Integer> counts = got.counts(k -> k.contains("-L"));
            check(arrived, "delayed messages missing after " + (maxDelay + lateMs) + " ms: got " + sample(counts.keySet()));
            List<String> problems = new ArrayList<>();
            Map<Integer, List<Long>> latencies = new TreeMap<>();
            for (FeatureDriver.Deliveries.Delivery d : got.all) {
                MessageExt m = d.msg();
                String key = firstKey(m);
                if (key == null || !key.contains("-L")) {
                    continue;
                }
                int level = Integer.parseInt(key.substring(key.indexOf("-L") + 2, key.lastIndexOf('-')));
                long delay = delaysMs.get(level - 1);
                long stored = m.getStoreTimestamp() - m.getBornTimestamp();
                long received = d.at() - m.getBornTimestamp();
                latencies.computeIfAbsent(level, l -> new ArrayList<>()).add(received);
                SendResult r = sent.get(key);
                if (stored < delay || received < delay) {
                    problems.add(key + " (level " + level + ", " + delay + " ms) stored after " + stored + " ms, received after "
                        + received + " ms");
                } else if (received > delay + lateMs) {
                    problems.add(key + " (level " + level + ", " + delay + " ms) received only after " + received + " ms");
                } else if (!m.getTopic().equals(topic) || m.getQueueId() != r.getMessageQueue().getQueueId()) {
                    problems.add(key + " arrived in " + m.getTopic() + " queue " + m.getQueueId() + ", sent to " + r.getMessageQueue());
                } else if (!body(m).equals("body of " + key + " level " + level) || !key.equals(m.getUserProperty("compatKey"))) {
                    problems.add(key + ": body or properties differ: " + body(m) + " " + m.getProperties());
                } else if (!Integer.toString(level).equals(m.getProperty("DELAY"))) {
                    // Java serialises the properties before it clears DELAY, so consumers see the level
                    problems.add(key + ": DELAY property " + m.getProperty("DELAY") + ", Java keeps the level " + level);
                }
            }
            latencies.forEach((level, l) -> facts.put("level" + level + "Ms", l.stream().sorted().toList()));
            List<String> dups = counts.entrySet().stream().filter(e -> e.getValue() > 1).map(Map.Entry::getKey).toList();
            check(dups.isEmpty(), "delivered more than once: " + sample(dups));
            check(problems.isEmpty(), problems.size() + " wrong deliveries: " + String.join("; ", problems.subList(0, Math.min(3, problems.size()))));
        } finally {
            consumer.shutdown();
            producer.shutdown();
        }
    }

    // ------------------------------------------------------------------------------------------------
    // retry and dead letters

    /** A consumer whose listener fails each message's first {@code failures} deliveries (all, if negative). */
    private DefaultMQPushConsumer failingConsumer(String topic, String group, int failures, FeatureDriver.Deliveries got)
        throws Exception {
        DefaultMQPushConsumer consumer = FeatureDriver.newPushConsumer(namesrv, group, instance("failing"));
        consumer.subscribe(topic, "*");
        consumer.setConsumeMessageBatchMaxSize(1);
        Map<String, AtomicInteger> seen = new ConcurrentHashMap<>();
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            MessageExt m = msgs.get(0);
            got.add("failing", m);
            int n = seen.computeIfAbsent(firstKey(m), k -> new AtomicInteger()).incrementAndGet();
            return failures < 0 || n <= failures ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        return consumer;
    }

    /** The reconsumeTimes of every delivery of {@code key}, in arrival order. */
    private static List<Integer> reconsumeTimes(FeatureDriver.Deliveries got, String key) {
        return got.all.stream().filter(d -> key.equals(firstKey(d.msg()))).map(d -> d.msg().getReconsumeTimes()).toList();
    }

    /** Every delivery came back as the message that was sent: topic, body, user property, message id. */
    private static void checkRedeliveries(FeatureDriver.Deliveries got, String topic, Map<String, String> ids) throws Steps.Failure {
        for (FeatureDriver.Deliveries.Delivery d : got.all) {
            MessageExt m = d.msg();
            String key = firstKey(m);
            check(m.getTopic().equals(topic), key + " delivery " + m.getReconsumeTimes() + " came as topic " + m.getTopic());
            check(body(m).startsWith("body of " + key) && key.equals(m.getUserProperty("compatKey")),
                key + " delivery " + m.getReconsumeTimes() + ": body or properties differ: " + body(m) + " " + m.getProperties());
            check(ids.get(key).equals(m.getMsgId()), key + " delivery " + m.getReconsumeTimes() + " has message id "
                + m.getMsgId() + ", sent as " + ids.get(key));
        }
    }

    private Map<String, String> sendKeyed(String topic, String what, int count) throws Exception {
        Map<String, String> ids = new TreeMap<>();
        DefaultMQProducer producer = producer(what);
        try {
            for (int i = 0; i < count; i++) {
                String key = runId + "-" + what + "-" + i;
                SendResult r = producer.send(message(topic, key, what));
                check(r.getSendStatus() == SendStatus.SEND_OK, "send of " + key + ": " + r);
                ids.put(key, r.getMsgId());
            }
        } finally {
            producer.shutdown();
        }
        return ids;
    }

    private void retry(String topic, String group, Map<String, Object> facts) throws Exception {
        Map<String, String> ids = sendKeyed(topic, "retry", 4);
        FeatureDriver.Deliveries got = new FeatureDriver.Deliveries();
        DefaultMQPushConsumer consumer = failingConsumer(topic, group, 3, got);
        try {
            boolean done = await(() -> ids.keySet().stream().allMatch(k -> reconsumeTimes(got, k).size() >= 4), TIMEOUT_MS);
            Thread.sleep(4000);   // a fifth delivery would come within a retry delay
            Map<String, List<Integer>> seen = new TreeMap<>();
            ids.keySet().forEach(k -> seen.put(k, reconsumeTimes(got, k)));
            facts.put("deliveries", seen.values().stream().mapToInt(List::size).sum());
            check(done, "not every message was delivered 4 times within " + TIMEOUT_MS + " ms: reconsumeTimes " + seen);
            for (Map.Entry<String, List<Integer>> e : seen.entrySet()) {
                check(e.getValue().equals(List.of(0, 1, 2, 3)), e.getKey() + ": reconsumeTimes of the deliveries " + e.getValue()
                    + ", want [0, 1, 2, 3]");
            }
            checkRedeliveries(got, topic, ids);
        } finally {
            consumer.shutdown();
        }
    }

    private void dlq(String topic, String group, Map<String, Object> facts) throws Exception {
        Map<String, String> ids = sendKeyed(topic, "dlq", 2);
        FeatureDriver.Deliveries got = new FeatureDriver.Deliveries();
        DefaultMQPushConsumer consumer = failingConsumer(topic, group, -1, got);
        String dlqTopic = "%DLQ%" + group;
        try {
            boolean done = await(() -> ids.keySet().stream().allMatch(k -> reconsumeTimes(got, k).size() >= DLQ_DELIVERIES),
                2 * TIMEOUT_MS);
            Map<String, List<Integer>> seen = new TreeMap<>();
            ids.keySet().forEach(k -> seen.put(k, reconsumeTimes(got, k)));
            facts.put("deliveries", seen.values().stream().mapToInt(List::size).sum());
            check(done, "not every message was delivered " + DLQ_DELIVERIES + " times within " + 2 * TIMEOUT_MS
                + " ms: reconsumeTimes " + seen);
            checkRedeliveries(got, topic, ids);
            List<String> found = new ArrayList<>();
            for (String key : ids.keySet()) {
                MessageExt m = findByKey(consumer, dlqTopic, key);
                check(m != null, key + " not found in " + dlqTopic + " by key within " + TIMEOUT_MS + " ms");
                check(body(m).startsWith("body of " + key) && key.equals(m.getUserProperty("compatKey")),
                    key + " in the DLQ: body or properties differ: " + body(m) + " " + m.getProperties());
                check(m.getReconsumeTimes() == DLQ_DELIVERIES, key + " in the DLQ has reconsumeTimes " + m.getReconsumeTimes());
                check(topic.equals(m.getProperty("RETRY_TOPIC")), key + " in the DLQ: RETRY_TOPIC " + m.getProperty("RETRY_TOPIC"));
                found.add(key + "@" + m.getQueueId() + ":" + m.getQueueOffset());
            }
            facts.put("dlq", found);
            Thread.sleep(3000);   // nothing comes back out of the DLQ
            for (Map.Entry<String, List<Integer>> e : seen.entrySet()) {
                List<Integer> now = reconsumeTimes(got, e.getKey());
                List<Integer> want = new ArrayList<>();
                for (int i = 0; i < DLQ_DELIVERIES; i++) {
                    want.add(i);
                }
                check(now.equals(want), e.getKey() + ": reconsumeTimes of the deliveries " + now + ", want 0 to 16 once each");
            }
        } finally {
            consumer.shutdown();
        }
    }

    /** queryMessage by key through the client's admin API, polled while the broker indexes. */
    @SuppressWarnings("deprecation")
    private static MessageExt findByKey(DefaultMQPushConsumer client, String topic, String key) throws Exception {
        long deadline = System.currentTimeMillis() + TIMEOUT_MS;
        Exception last = null;
        while (System.currentTimeMillis() < deadline) {
            try {
                QueryResult r = client.queryMessage(topic, key, 32, 0, Long.MAX_VALUE);
                for (MessageExt m : r.getMessageList()) {
                    if (key.equals(firstKey(m))) {
                        return m;
                    }
                }
            } catch (Exception e) {
                last = e;   // no route to the DLQ topic yet, or nothing indexed yet
            }
            Thread.sleep(250);
        }
        if (last != null) {
            System.out.println("queryMessage(" + topic + ", " + key + ") last failed with " + last);
        }
        return null;
    }

    // ------------------------------------------------------------------------------------------------
    // orderly

    private DefaultMQPushConsumer orderlyConsumer(String topic, String group, String label, FeatureDriver.Deliveries got)
        throws Exception {
        DefaultMQPushConsumer consumer = FeatureDriver.newPushConsumer(namesrv, group, instance("orderly-" + label));
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
            msgs.forEach(m -> got.add(label, m));
            return ConsumeOrderlyStatus.SUCCESS;
        });
        consumer.start();
        return consumer;
    }

    /** Sends {@code steps} messages of each of {@code orders} orders, interleaved, each order to one queue. */
    private void sendOrders(DefaultMQProducer producer, String topic, String batch, int orders, int steps) throws Exception {
        for (int s = 0; s < steps; s++) {
            for (int o = 0; o < orders; o++) {
                Message msg = message(topic, runId + "-" + batch + "-o" + o + "-s" + s, "order " + o + " step " + s);
                SendResult r = producer.send(msg, (mqs, m, arg) -> mqs.get((Integer) arg % mqs.size()), o);
                check(r.getSendStatus() == SendStatus.SEND_OK, "send of " + msg.getKeys() + ": " + r);
            }
        }
    }

    /** Every order of {@code batch} arrived in send order, each at one consumer, no step twice. */
    private static void checkOrders(FeatureDriver.Deliveries got, String runId, String batch, int orders, int steps)
        throws Steps.Failure {
        for (int o = 0; o < orders; o++) {
            String prefix = runId + "-" + batch + "-o" + o + "-s";
            List<Integer> sequence = new ArrayList<>();
            Set<String> consumers = new TreeSet<>();
            for (FeatureDriver.Deliveries.Delivery d : got.all) {
                String key = firstKey(d.msg());
                if (key != null && key.startsWith(prefix)) {
                    sequence.add(Integer.parseInt(key.substring(prefix.length())));
                    consumers.add(d.consumer());
                }
            }
            List<Integer> want = new ArrayList<>();
            for (int s = 0; s < steps; s++) {
                want.add(s);
            }
            check(sequence.equals(want), batch + " order " + o + " arrived as steps " + sequence);
            check(consumers.size() == 1, batch + " order " + o + " was consumed by " + consumers);
        }
    }

    /** Waits until every queue a consumer holds is locked at the broker (an orderly consumer only consumes those). */
    private static boolean awaitLocked(List<DefaultMQPushConsumer> consumers, String topic) throws InterruptedException {
        return await(() -> consumers.stream().allMatch(c -> {
            Map<MessageQueue, ProcessQueue> table = c.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable();
            return table.entrySet().stream().filter(e -> e.getKey().getTopic().equals(topic)).allMatch(e -> e.getValue().isLocked());
        }), TIMEOUT_MS);
    }

    private void orderly(String topic, String group, Map<String, Object> facts) throws Exception {
        final int orders = 8;
        final int steps = 20;
        DefaultMQProducer producer = producer("orderly");
        List<DefaultMQPushConsumer> consumers = new ArrayList<>();
        FeatureDriver.Deliveries got = new FeatureDriver.Deliveries();
        try {
            sendOk(producer, message(topic, runId + "-warm", "warm"));
            int queues = FeatureDriver.awaitRoute(producer, topic, TIMEOUT_MS, n -> n > 0);
            check(queues > 0, "no route for " + topic + " within " + TIMEOUT_MS + " ms");
            consumers.add(orderlyConsumer(topic, group, "A", got));
            consumers.add(orderlyConsumer(topic, group, "B", got));
            FeatureDriver.awaitPartition(consumers, topic, queues, TIMEOUT_MS);
            check(awaitLocked(consumers, topic), "the two consumers' queues were not all locked within " + TIMEOUT_MS + " ms");
            sendOrders(producer, topic, "first", orders, steps);
            check(got.await(k -> k.contains("-first-"), orders * steps, TIMEOUT_MS, 1000),
                "first batch: " + got.distinctKeys(k -> k.contains("-first-")).size() + " of " + orders * steps + " arrived");
            checkOrders(got, runId, "first", orders, steps);

            consumers.add(orderlyConsumer(topic, group, "C", got));
            List<Set<MessageQueue>> held = FeatureDriver.awaitPartition(consumers, topic, queues, TIMEOUT_MS);
            check(awaitLocked(consumers, topic), "after the third consumer joined, its queues were not all locked within "
                + TIMEOUT_MS + " ms (the previous owner must unlock, the new one lock)");
            facts.put("queuesHeld", held.stream().map(Set::size).toList());
            sendOrders(producer, topic, "second", orders, steps);
            check(got.await(k -> k.contains("-second-"), orders * steps, TIMEOUT_MS, 1000),
                "second batch: " + got.distinctKeys(k -> k.contains("-second-")).size() + " of " + orders * steps + " arrived");
            checkOrders(got, runId, "second", orders, steps);
            facts.put("delivered", got.distinctKeys(k -> k.contains("-first-") || k.contains("-second-")).size());
        } finally {
            for (DefaultMQPushConsumer c : consumers) {
                c.shutdown();
            }
            producer.shutdown();
        }
    }
}
