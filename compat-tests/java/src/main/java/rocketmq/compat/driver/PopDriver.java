package rocketmq.compat.driver;

import static rocketmq.compat.driver.Steps.check;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * Child-JVM driver for 5.x pop consumption ({@code PopConsumeTest}) with the official 5.3.3 client (run with the
 * rocketmq-tools 5.3.3 classpath, which holds the client and {@code DefaultMQAdminExt}); the pop calls are made
 * reflectively ({@link Pop5}). Usage: {@code PopDriver <namesrvAddr> <brokerName> <brokerAddr> <step> ...}, a step
 * being {@code name:arg:arg...}. Every step checks what it did and fails with the problems it found; lines the test
 * compares between Java's broker and ours:
 *
 * <ul>
 *   <li>{@code CMP name value}: a fact that must be the same on both brokers (statuses, handle shapes, codes and
 *       remarks of raw requests, property names);
 *   <li>{@code POPRESULT ...}, {@code POPPED ...}, {@code REVIVED ...}, {@code PGOT ...}: what happened, for the log.
 * </ul>
 *
 * Steps:
 *
 * <ul>
 *   <li>{@code api:TOPIC:GROUP:COUNT:INVISIBLE_MS:CHANGE_MS}: COUNT messages are sent to TOPIC and popped
 *       ({@code MQClientAPIImpl.popMessageAsync}, queueId -1, 8 at a time, INVISIBLE_MS); of them one in three is
 *       acked, one in three gets {@code changeInvisibleTimeAsync(CHANGE_MS)}, one in three is left. Then pops until
 *       every left and changed message came back (and 5 s more): each once, not before its invisible time, with
 *       reconsumeTimes 1 under TOPIC, its receipt handle (from the retry topic) usable to ack; no acked one back.
 *   <li>{@code codes:TOPIC:EMPTY_TOPIC:GROUP}: raw POP_MESSAGE / ACK_MESSAGE / CHANGE_MESSAGE_INVISIBLETIME requests
 *       that are refused or find nothing, each printed as {@code CMP code.<case> <code> <remark>}.
 *   <li>{@code orderly:TOPIC:GROUP}: orderly pops ({@code order=true}) of queue 0, 2 at a time: the queue gives
 *       nothing more while a popped message is unacked, the next two once both are acked, the same two again (with
 *       reconsumeTimes 1) once their invisible time passed unacked.
 *   <li>{@code inflight:TOPIC:GROUP:PREFIX:COUNT:INVISIBLE_MS}: COUNT messages sent and popped; every even one acked.
 *   <li>{@code collect:WATCH_S:once|atLeastOnce}: after the broker came back (a kill, a takeover), pops and acks until
 *       every unacked message of {@code inflight} came back (and 5 s more) or WATCH_S passed: each unacked back (once,
 *       or at least once), not before its invisible time; no acked one.
 *   <li>{@code push:TOPIC:GROUP:COUNT}: {@code DefaultMQAdminExt.setMessageRequestMode(POP, 8)},
 *       then a push consumer with {@code setClientRebalance(false)}; COUNT {@code ok-} messages, 4 {@code late-}
 *       (RECONSUME_LATER once), 2 {@code fail-} (RECONSUME_LATER always, maxReconsumeTimes 1: redelivered once, then,
 *       past maxReconsumeTimes, the 5.3.3 client changes the invisible time again instead of sending it to the DLQ;
 *       the DLQ topic is looked at SETTLE_MS after that).
 *   <li>{@code waitFile:PATH:SECONDS}.
 * </ul>
 */
public final class PopDriver {
    static final int QUEUES = 8;
    /** How long after the last expected message came back pops go on (for second deliveries). */
    static final long SETTLE_MS = 5000;
    static final String TAGS = "TagPop";

    private final String namesrv;
    private final String brokerName;
    private final String brokerAddr;
    private final String runId = UUID.randomUUID().toString().substring(0, 8);
    private final AtomicInteger instances = new AtomicInteger();
    private final List<Runnable> shutdowns = new ArrayList<>();
    private DefaultMQProducer producer;
    /** The inflight step's messages, for collect. */
    private InFlight inflight;

    private PopDriver(String namesrv, String brokerName, String brokerAddr) {
        this.namesrv = namesrv;
        this.brokerName = brokerName;
        this.brokerAddr = brokerAddr;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 4) {
            System.err.println("usage: PopDriver <namesrvAddr> <brokerName> <brokerAddr> <step> [<step> ...]");
            System.exit(2);
        }
        PopDriver driver = new PopDriver(args[0], args[1], args[2]);
        Steps.printClient(driver.runId);
        boolean allOk = true;
        for (String step : Arrays.asList(args).subList(3, args.length)) {
            String[] s = step.split(":");
            allOk &= Steps.report(s[0], facts -> driver.run(s, facts));
        }
        driver.shutdownAll();
        System.out.flush();
        System.exit(allOk ? 0 : 1);
    }

    private void run(String[] s, Map<String, Object> facts) throws Exception {
        switch (s[0]) {
            case "api" -> api(s[1], s[2], Integer.parseInt(s[3]), Long.parseLong(s[4]), Long.parseLong(s[5]), facts);
            case "codes" -> codes(s[1], s[2], s[3], facts);
            case "orderly" -> orderly(s[1], s[2], facts);
            case "inflight" -> inflight(s[1], s[2], s[3], Integer.parseInt(s[4]), Long.parseLong(s[5]), facts);
            case "collect" -> collect(Integer.parseInt(s[1]), s[2].equals("once"), facts);
            case "push" -> push(s[1], s[2], Integer.parseInt(s[3]), facts);
            case "waitFile" -> waitFile(Path.of(s[1]), Integer.parseInt(s[2]));
            default -> throw new Steps.Failure("unknown step " + s[0]);
        }
    }

    private String instance(String what) {
        return what + "-" + runId + "-" + instances.incrementAndGet();
    }

    private DefaultMQProducer producer() throws Exception {
        if (producer == null) {
            producer = FeatureDriver.newProducer(namesrv, "pop_producer_" + runId, instance("producer"));
            producer.start();
            shutdowns.add(0, producer::shutdown);
        }
        return producer;
    }

    private MQClientAPIImpl api() throws Exception {
        return producer().getDefaultMQProducerImpl().getMqClientFactory().getMQClientAPIImpl();
    }

    static byte[] body(String key) {
        return ("pop body of " + key + " \u00e9\u00e8 ").repeat(4).getBytes(StandardCharsets.UTF_8);
    }

    private static synchronized void print(String format, Object... args) {
        System.out.printf(format + "%n", args);
        System.out.flush();
    }

    private static void cmp(String name, Object value) {
        print("CMP %s %s", name, String.valueOf(value).replace('\n', ' '));
    }

    /** Sends {@code keys} (sync, round robin over the queues); fails unless each is SEND_OK. */
    private Map<String, SendResult> send(String topic, List<String> keys) throws Exception {
        Map<String, SendResult> sent = new LinkedHashMap<>();
        for (String key : keys) {
            Message msg = new Message(topic, TAGS, key, body(key));
            msg.putUserProperty("keyAgain", key);
            SendResult r = producer().send(msg);
            check(r.getSendStatus() == SendStatus.SEND_OK, key + ": " + r.getSendStatus());
            sent.put(key, r);
        }
        return sent;
    }

    static List<String> keys(String prefix, int count) {
        List<String> keys = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            keys.add(prefix + "-" + i);
        }
        return keys;
    }

    static String intact(MessageExt m, String key) {
        List<String> problems = new ArrayList<>();
        if (!Arrays.equals(m.getBody(), body(key))) {
            problems.add("body");
        }
        if (!TAGS.equals(m.getTags())) {
            problems.add("tags=" + m.getTags());
        }
        if (!key.equals(m.getUserProperty("keyAgain"))) {
            problems.add("keyAgain=" + m.getUserProperty("keyAgain"));
        }
        return problems.isEmpty() ? "ok" : String.join(",", problems);
    }

    // ------------------------------------------------------------------------------------------------
    // pops

    /** One popped message with what its receipt handle says. */
    record Popped(String key, MessageExt msg, Pop5.Handle handle, long receivedMs, Pop5.PopOut result) {
    }

    /**
     * Pops (queueId -1) once and checks the PopResult and each message against it: returns the messages with their
     * parsed handles; adds every problem found.
     */
    private List<Popped> popOnce(String topic, String group, int max, long invisibleMs, long pollMs,
                                 List<String> problems) throws Exception {
        Pop5.PopOut o = Pop5.pop(api(), brokerName, brokerAddr, group, topic, -1, max, invisibleMs, pollMs);
        print("POPRESULT %s popTime=%d invisibleTime=%d restNum=%d msgs=%d call=%d..%d", o.status(), o.popTime(),
            o.invisibleTime(), o.restNum(), o.msgs().size(), o.startMs(), o.endMs());
        List<Popped> out = new ArrayList<>();
        if (o.msgs().isEmpty()) {
            return out;
        }
        if (!o.status().equals("FOUND")) {
            problems.add("a pop with messages has status " + o.status());
        }
        if (o.popTime() < o.startMs() - 5 || o.popTime() > o.endMs() + 5) {
            problems.add("popTime " + o.popTime() + " outside the call " + o.startMs() + ".." + o.endMs());
        }
        if (o.invisibleTime() != invisibleMs) {
            problems.add("PopResult invisibleTime " + o.invisibleTime() + ", asked " + invisibleMs);
        }
        if (o.restNum() < 0) {
            problems.add("restNum " + o.restNum());
        }
        long now = System.currentTimeMillis();
        for (MessageExt m : o.msgs()) {
            String key = m.getKeys();
            String handle = Pop5.handle(m);
            if (handle == null) {
                problems.add(key + " has no POP_CK");
                continue;
            }
            Pop5.Handle h;
            try {
                h = Pop5.parse(handle);
            } catch (Exception e) {
                problems.add(key + ": receipt handle " + handle + " does not parse: " + e);
                continue;
            }
            if (h.popTime() != o.popTime() || h.invisibleTime() != invisibleMs || !h.brokerName().equals(brokerName)
                || h.queueId() != m.getQueueId() || h.queueOffset() != m.getQueueOffset() || h.ckQueueOffset() > h.queueOffset()) {
                problems.add(key + ": receipt handle " + handle + " disagrees with the message (queue " + m.getQueueId()
                    + " offset " + m.getQueueOffset() + ") or the PopResult (popTime " + o.popTime() + ")");
            }
            if (!topic.equals(m.getTopic())) {
                problems.add(key + " under topic " + m.getTopic());
            }
            String intact = key == null ? "no-key" : intact(m, key);
            if (!intact.equals("ok")) {
                problems.add(key + " arrived changed: " + intact);
            }
            print("POPPED %s %d %d %d retry=%s q=%d qo=%d ck=%d reconsume=%d handle=[%s]", key, now, o.popTime(),
                o.invisibleTime(), h.retry(), m.getQueueId(), m.getQueueOffset(), h.ckQueueOffset(), m.getReconsumeTimes(),
                handle);
            out.add(new Popped(key, m, h, now, o));
        }
        return out;
    }

    /** The first pops of {@code keys}: each once; fails if not all came within 30 s. */
    private Map<String, Popped> popAll(String topic, String group, List<String> keys, long invisibleMs,
                                       List<String> problems) throws Exception {
        Map<String, Popped> first = new LinkedHashMap<>();
        long deadline = System.currentTimeMillis() + 30_000;
        Set<String> statuses = new TreeSet<>();
        while (first.size() < keys.size() && System.currentTimeMillis() < deadline) {
            for (Popped p : popOnce(topic, group, 8, invisibleMs, 1000, problems)) {
                statuses.add(p.result().status());
                if (first.containsKey(p.key())) {
                    problems.add(p.key() + " popped twice within its invisible time");
                } else if (!keys.contains(p.key())) {
                    problems.add("popped " + p.key() + ", never sent");
                } else {
                    if (p.msg().getReconsumeTimes() != 0 || !p.handle().retry().equals("0")) {
                        problems.add(p.key() + " first pop: reconsumeTimes " + p.msg().getReconsumeTimes() + " retry "
                            + p.handle().retry());
                    }
                    first.put(p.key(), p);
                }
            }
        }
        cmp("firstPops.statuses", statuses);
        check(first.size() == keys.size(), "popped " + first.size() + " of " + keys.size() + " within 30 s; problems: "
            + problems);
        return first;
    }

    /** Where a message came back: its deliveries, each with the ack's status. */
    record Back(Popped popped, String ackStatus) {
    }

    /**
     * Pops (invisible 60 s) and acks whatever comes until every key of {@code expected} came back and SETTLE_MS
     * passed since the last one, or until {@code deadlineMs}.
     */
    private Map<String, List<Back>> watch(String topic, String group, Set<String> expected, long notBeforeMs,
                                          long deadlineMs, List<String> problems) throws Exception {
        Map<String, List<Back>> back = new LinkedHashMap<>();
        long lastNew = System.currentTimeMillis();
        while (System.currentTimeMillis() < deadlineMs) {
            boolean all = back.keySet().containsAll(expected);
            if (all && System.currentTimeMillis() > Math.max(lastNew, notBeforeMs) + SETTLE_MS) {
                break;
            }
            List<Popped> got;
            try {
                got = popOnce(topic, group, 32, 60_000, 1000, problems);
            } catch (Exception e) {
                print("POPFAILED %s", e);
                Thread.sleep(500);
                continue;
            }
            for (Popped p : got) {
                Pop5.AckOut a = Pop5.ack(api(), brokerAddr, p.msg(), group);
                print("REVIVED %s %d reconsume=%d retry=%s ack=%s props=%s", p.key(), p.receivedMs(),
                    p.msg().getReconsumeTimes(), p.handle().retry(), a.status(),
                    new TreeMap<>(p.msg().getProperties()).toString().replace(' ', '_'));
                if (!back.containsKey(p.key())) {
                    lastNew = System.currentTimeMillis();
                }
                back.computeIfAbsent(p.key(), k -> new ArrayList<>()).add(new Back(p, a.status()));
            }
        }
        return back;
    }

    static String stats(List<Long> values) {
        if (values.isEmpty()) {
            return "-";
        }
        List<Long> sorted = values.stream().sorted().toList();
        return sorted.get(0) + "/" + sorted.get(sorted.size() / 2) + "/" + sorted.get(sorted.size() - 1) + "ms";
    }

    // ------------------------------------------------------------------------------------------------
    // steps

    private void api(String topic, String group, int count, long invisibleMs, long changeMs, Map<String, Object> facts)
        throws Exception {
        List<String> problems = new ArrayList<>();
        List<String> keys = keys("api", count);
        send(topic, keys);
        Map<String, Popped> first = popAll(topic, group, keys, invisibleMs, problems);
        Popped sample = first.values().iterator().next();
        cmp("firstPop.handleFields", sample.handle().fields());
        cmp("firstPop.retry", sample.handle().retry());
        cmp("firstPop.propertyNames", new TreeSet<>(sample.msg().getProperties().keySet()));

        List<String> acked = new ArrayList<>();
        List<String> left = new ArrayList<>();
        Map<String, Long> changedDue = new LinkedHashMap<>();
        Set<String> ackStatuses = new TreeSet<>();
        Set<String> changeStatuses = new TreeSet<>();
        List<String> batch = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            String key = keys.get(i);
            Popped p = first.get(key);
            switch (i % 3) {
                case 0 -> {
                    // every other one in a batch (BATCH_ACK_MESSAGE) below
                    if (i % 2 == 0) {
                        Pop5.AckOut a = Pop5.ack(api(), brokerAddr, p.msg(), group);
                        ackStatuses.add(a.status());
                    } else {
                        batch.add(Pop5.handle(p.msg()));
                    }
                    acked.add(key);
                }
                case 1 -> {
                    long start = System.currentTimeMillis();
                    Pop5.AckOut a = Pop5.change(api(), brokerName, brokerAddr, p.msg(), group, changeMs);
                    long end = System.currentTimeMillis();
                    changeStatuses.add(a.status());
                    print("CHANGED %s %d..%d status=%s popTime=%d extraInfo=[%s]", key, start, end, a.status(),
                        a.popTime(), a.extraInfo());
                    if (a.popTime() < start - 5 || a.popTime() > end + 5) {
                        problems.add(key + ": changeInvisibleTime's popTime " + a.popTime() + " outside the call "
                            + start + ".." + end);
                    }
                    if (a.extraInfo() == null || Pop5.parse(a.extraInfo()).invisibleTime() != changeMs) {
                        problems.add(key + ": changeInvisibleTime's extraInfo " + a.extraInfo());
                    }
                    changedDue.put(key, Math.max(a.popTime(), start) + changeMs);
                }
                default -> left.add(key);
            }
        }
        cmp("ack.statuses", ackStatuses);
        cmp("batchAck.status", Pop5.batchAck(api(), brokerAddr, topic, group, batch).status());
        cmp("batchAck.empty", Pop5.batchAck(api(), brokerAddr, topic, group, List.of()).status());
        cmp("change.statuses", changeStatuses);
        // An ack of a message acked already.
        Pop5.AckOut again = Pop5.ack(api(), brokerAddr, first.get(acked.get(0)).msg(), group);
        cmp("ackAgain.status", again.status());
        RemotingCommand againRaw = Pop5.raw(api(), brokerAddr, Pop5.ACK_MESSAGE, Pop5.ackHeader(first.get(acked.get(0)).msg(), group));
        cmp("ackAgain.raw", againRaw.getCode() + " " + againRaw.getRemark());

        Set<String> expected = new TreeSet<>(left);
        expected.addAll(changedDue.keySet());
        long lastDue = changedDue.values().stream().mapToLong(Long::longValue).max().orElse(0);
        Map<String, List<Back>> back = watch(topic, group, expected, lastDue, lastDue + 40_000, problems);

        List<Long> leftLate = new ArrayList<>();
        List<Long> changedLate = new ArrayList<>();
        Set<String> retryFlags = new TreeSet<>();
        Set<String> reconsume = new TreeSet<>();
        Set<String> revAckStatuses = new TreeSet<>();
        Set<String> revPropertyNames = null;
        for (String key : keys) {
            List<Back> b = back.getOrDefault(key, List.of());
            Popped p = first.get(key);
            if (acked.contains(key)) {
                if (!b.isEmpty()) {
                    problems.add(key + " was acked and came back " + b.size() + " time(s)");
                }
                continue;
            }
            long due = acked.contains(key) ? 0 : left.contains(key) ? p.result().popTime() + invisibleMs : changedDue.get(key);
            if (b.isEmpty()) {
                problems.add(key + (left.contains(key) ? " (left)" : " (changed)") + " never came back (due " + due + ")");
                continue;
            }
            if (b.size() > 1) {
                problems.add(key + " came back " + b.size() + " times");
            }
            Back r = b.get(0);
            long late = r.popped().receivedMs() - due;
            (left.contains(key) ? leftLate : changedLate).add(late);
            if (late < 0) {
                problems.add(key + (left.contains(key) ? " (left)" : " (changed)") + " came back " + (-late)
                    + " ms before its invisible time ended");
            }
            if (r.popped().msg().getReconsumeTimes() != 1) {
                problems.add(key + " came back with reconsumeTimes " + r.popped().msg().getReconsumeTimes());
            }
            if (!r.ackStatus().equals("OK")) {
                problems.add(key + ": the ack of its retry receipt handle answered " + r.ackStatus());
            }
            retryFlags.add(r.popped().handle().retry());
            reconsume.add(Integer.toString(r.popped().msg().getReconsumeTimes()));
            revAckStatuses.add(r.ackStatus());
            if (revPropertyNames == null) {
                revPropertyNames = new TreeSet<>(r.popped().msg().getProperties().keySet());
            }
        }
        cmp("revived.retry", retryFlags);
        cmp("revived.reconsumeTimes", reconsume);
        cmp("revived.ackStatuses", revAckStatuses);
        cmp("revived.propertyNames", revPropertyNames);
        facts.put("acked", acked.size());
        facts.put("left", left.size());
        facts.put("changed", changedDue.size());
        facts.put("leftBackLate", stats(leftLate));
        facts.put("changedBackLate", stats(changedLate));
        check(problems.isEmpty(), problems.size() + " problem(s): " + String.join("; ",
            problems.subList(0, Math.min(12, problems.size()))));
    }

    private void codes(String topic, String emptyTopic, String group, Map<String, Object> facts) throws Exception {
        MQClientAPIImpl api = api();
        // A message to ack with wrong fields: pop one first.
        Message one = new Message(topic, TAGS, "codes-0", body("codes-0"));
        one.putUserProperty("keyAgain", "codes-0");
        check(producer().send(one, new MessageQueue(topic, brokerName, 0)).getSendStatus() == SendStatus.SEND_OK,
            "codes-0 not stored");
        List<String> problems = new ArrayList<>();
        List<Popped> got = new ArrayList<>();
        long deadline = System.currentTimeMillis() + 20_000;
        while (got.isEmpty() && System.currentTimeMillis() < deadline) {
            got = popOnce(topic, group, 1, 30_000, 1000, problems);
        }
        check(!got.isEmpty(), "nothing popped from " + topic);
        MessageExt m = got.get(0).msg();

        Map<String, Object> cases = new LinkedHashMap<>();
        cases.put("pop.noTopic", Pop5.popHeader(group, topic + "_none", brokerName, -1, 8, 30_000, 0));
        cases.put("pop.queue99", Pop5.popHeader(group, topic, brokerName, 99, 8, 30_000, 0));
        cases.put("pop.max33", Pop5.popHeader(group, topic, brokerName, -1, 33, 30_000, 0));
        cases.put("pop.empty", Pop5.popHeader(group, emptyTopic, brokerName, -1, 8, 30_000, 0));
        cases.put("pop.emptyQueue3", Pop5.popHeader(group, emptyTopic, brokerName, 3, 8, 30_000, 0));
        cases.put("pop.emptyPolled", Pop5.popHeader(group, emptyTopic, brokerName, -1, 8, 30_000, 1500));
        Object stale = Pop5.popHeader(group, emptyTopic, brokerName, -1, 8, 30_000, 1000);
        Pop5.call(stale, "setBornTime", System.currentTimeMillis() - 60_000);
        cases.put("pop.bornLongAgo", stale);
        for (Map.Entry<String, Object> c : cases.entrySet()) {
            Object h = c.getValue();
            if (!c.getKey().equals("pop.bornLongAgo")) {
                Pop5.call(h, "setBornTime", System.currentTimeMillis());
            }
            RemotingCommand r = Pop5.raw(api, brokerAddr, Pop5.POP_MESSAGE, h);
            Map<String, String> ext = r.getExtFields() == null ? Map.of() : r.getExtFields();
            cmp("code." + c.getKey(), normalize(r.getCode() + " " + r.getRemark() + " fields=" + new TreeSet<>(ext.keySet())
                + (ext.containsKey("restNum") ? " restNum=" + ext.get("restNum") : ""), topic, emptyTopic));
        }

        Map<String, Object> acks = new LinkedHashMap<>();
        Object beyond = Pop5.ackHeader(m, group);
        Pop5.call(beyond, "setOffset", Long.valueOf(1_000_000L));
        acks.put("ack.offsetBeyond", beyond);
        Object q99 = Pop5.ackHeader(m, group);
        Pop5.call(q99, "setQueueId", Integer.valueOf(99));
        acks.put("ack.queue99", q99);
        Object noTopic = Pop5.ackHeader(m, group);
        Pop5.call(noTopic, "setTopic", topic + "_none");
        acks.put("ack.noTopic", noTopic);
        Object shortHandle = Pop5.ackHeader(m, group);
        Pop5.call(shortHandle, "setExtraInfo", "0 1 2");
        acks.put("ack.shortHandle", shortHandle);
        Object otherGroup = Pop5.ackHeader(m, group);
        Pop5.call(otherGroup, "setConsumerGroup", group + "_other");
        acks.put("ack.otherGroup", otherGroup);
        for (Map.Entry<String, Object> c : acks.entrySet()) {
            RemotingCommand r = Pop5.raw(api, brokerAddr, Pop5.ACK_MESSAGE, c.getValue());
            if (c.getKey().equals("ack.shortHandle")) {
                // Java answers with its exception's text (an IllegalArgumentException of ExtraInfoUtil): the code only
                print("INFO code.%s %d %s", c.getKey(), r.getCode(), r.getRemark());
                cmp("code." + c.getKey(), r.getCode());
                continue;
            }
            cmp("code." + c.getKey(), normalize(r.getCode() + " " + r.getRemark(), topic, emptyTopic));
        }

        Map<String, Object> changes = new LinkedHashMap<>();
        Object cBeyond = Pop5.changeHeader(m, group, 10_000);
        Pop5.call(cBeyond, "setOffset", Long.valueOf(1_000_000L));
        changes.put("change.offsetBeyond", cBeyond);
        Object cQ99 = Pop5.changeHeader(m, group, 10_000);
        Pop5.call(cQ99, "setQueueId", Integer.valueOf(99));
        changes.put("change.queue99", cQ99);
        Object cNoTopic = Pop5.changeHeader(m, group, 10_000);
        Pop5.call(cNoTopic, "setTopic", topic + "_none");
        changes.put("change.noTopic", cNoTopic);
        changes.put("change.ok", Pop5.changeHeader(m, group, 30_000));
        for (Map.Entry<String, Object> c : changes.entrySet()) {
            RemotingCommand r = Pop5.raw(api, brokerAddr, Pop5.CHANGE_MESSAGE_INVISIBLETIME, c.getValue());
            Map<String, String> ext = r.getExtFields() == null ? Map.of() : r.getExtFields();
            cmp("code." + c.getKey(), normalize(r.getCode() + " " + r.getRemark() + " fields=" + new TreeSet<>(ext.keySet()),
                topic, emptyTopic));
        }
        RemotingCommand okAck = Pop5.raw(api, brokerAddr, Pop5.ACK_MESSAGE, Pop5.ackHeader(m, group));
        cmp("code.ack.ok", okAck.getCode() + " " + okAck.getRemark());
        // What the client's changeInvisibleTimeAsync makes of a refusal: AckResult NO_EXIST (or an exception).
        String clientSaw;
        try {
            java.util.concurrent.CompletableFuture<Object> f = new java.util.concurrent.CompletableFuture<>();
            Pop5.call(api, "changeInvisibleTimeAsync", brokerName, brokerAddr, cBeyond, Pop5.TIMEOUT_MS,
                Pop5.callback("org.apache.rocketmq.client.consumer.AckCallback", f));
            clientSaw = "AckResult " + Pop5.ackOut(Pop5.await(f)).status();
        } catch (Exception e) {
            clientSaw = e.getClass().getSimpleName() + " " + e.getMessage();
        }
        cmp("code.change.offsetBeyondThroughClient", clientSaw);
        facts.put("cases", cases.size() + acks.size() + changes.size() + 1);
        check(problems.isEmpty(), String.join("; ", problems));
    }

    /** A remark with the broker's own names (topics, client port) replaced, to compare brokers. */
    static String normalize(String s, String topic, String emptyTopic) {
        return s.replace(emptyTopic, "EMPTY_TOPIC").replace(topic, "TOPIC").replaceAll("127\\.0\\.0\\.1:\\d+", "127.0.0.1:PORT");
    }

    private String orderlyPop(String topic, String group, long invisibleMs, List<MessageExt> into) throws Exception {
        Pop5.PopOut o = Pop5.pop(api(), brokerName, brokerAddr, group, topic, 0, 2, invisibleMs, 0, true);
        into.clear();
        into.addAll(o.msgs());
        List<String> seen = new ArrayList<>();
        for (MessageExt m : o.msgs()) {
            Pop5.Handle h = Pop5.parse(Pop5.handle(m));
            seen.add(m.getKeys() + "@" + m.getQueueOffset() + "/rt" + m.getReconsumeTimes() + "/rq" + h.reviveQid() + "/r"
                + h.retry());
        }
        String out = o.status() + " " + seen;
        print("ORDERLY %s", out);
        return out;
    }

    private void orderly(String topic, String group, Map<String, Object> facts) throws Exception {
        for (String key : keys("ord", 6)) {
            Message msg = new Message(topic, TAGS, key, body(key));
            msg.putUserProperty("keyAgain", key);
            check(producer().send(msg, new MessageQueue(topic, brokerName, 0)).getSendStatus() == SendStatus.SEND_OK,
                key + " not stored");
        }
        List<MessageExt> got = new ArrayList<>();
        cmp("orderly.1.first", orderlyPop(topic, group, 20_000, got));
        List<MessageExt> first = new ArrayList<>(got);
        cmp("orderly.2.whileInFlight", orderlyPop(topic, group, 20_000, got));
        check(first.size() == 2, "the first orderly pop gave " + first.size() + " messages");
        cmp("orderly.3.ackFirst", Pop5.ack(api(), brokerAddr, first.get(0), group).status());
        cmp("orderly.4.oneStillInFlight", orderlyPop(topic, group, 20_000, got));
        cmp("orderly.5.ackSecond", Pop5.ack(api(), brokerAddr, first.get(1), group).status());
        cmp("orderly.6.next", orderlyPop(topic, group, 3000, got));
        long poppedAt = System.currentTimeMillis();
        cmp("orderly.7.nextInFlight", orderlyPop(topic, group, 3000, got));
        while (System.currentTimeMillis() < poppedAt + 3500) {
            Thread.sleep(100);
        }
        String again = "";
        long deadline = System.currentTimeMillis() + 10_000;
        while (System.currentTimeMillis() < deadline) {
            again = orderlyPop(topic, group, 20_000, got);
            if (!got.isEmpty()) {
                break;
            }
            Thread.sleep(200);
        }
        cmp("orderly.8.againAfterInvisible", again);
        for (MessageExt m : new ArrayList<>(got)) {
            cmp("orderly.9.ackAgain." + m.getKeys(), Pop5.ack(api(), brokerAddr, m, group).status());
        }
        cmp("orderly.10.last", orderlyPop(topic, group, 20_000, got));
        facts.put("popped", "ok");
    }

    /** The messages of the inflight step. */
    private record InFlight(String topic, String group, long invisibleMs, Map<String, Popped> first, Set<String> acked) {
    }

    private void inflight(String topic, String group, String prefix, int count, long invisibleMs,
                          Map<String, Object> facts) throws Exception {
        List<String> problems = new ArrayList<>();
        List<String> keys = keys(prefix, count);
        send(topic, keys);
        Map<String, Popped> first = popAll(topic, group, keys, invisibleMs, problems);
        Set<String> acked = new TreeSet<>();
        for (int i = 0; i < count; i += 2) {
            Pop5.AckOut a = Pop5.ack(api(), brokerAddr, first.get(keys.get(i)).msg(), group);
            check(a.status().equals("OK"), keys.get(i) + ": ack answered " + a.status());
            acked.add(keys.get(i));
        }
        inflight = new InFlight(topic, group, invisibleMs, first, acked);
        facts.put("popped", first.size());
        facts.put("acked", acked.size());
        print("INFLIGHT_DONE %d", System.currentTimeMillis());
        check(problems.isEmpty(), String.join("; ", problems));
    }

    private void collect(int watchSeconds, boolean once, Map<String, Object> facts) throws Exception {
        check(inflight != null, "collect without inflight");
        List<String> problems = new ArrayList<>();
        Set<String> expected = new TreeSet<>(inflight.first().keySet());
        expected.removeAll(inflight.acked());
        long lastDue = inflight.first().values().stream().mapToLong(p -> p.result().popTime()).max().orElse(0)
            + inflight.invisibleMs();
        Map<String, List<Back>> back = watch(inflight.topic(), inflight.group(), expected, lastDue,
            System.currentTimeMillis() + watchSeconds * 1000L, problems);
        List<Long> late = new ArrayList<>();
        int twice = 0;
        for (Map.Entry<String, Popped> e : inflight.first().entrySet()) {
            String key = e.getKey();
            List<Back> b = back.getOrDefault(key, List.of());
            if (inflight.acked().contains(key)) {
                if (!b.isEmpty()) {
                    problems.add(key + " was acked and came back " + b.size() + " time(s)");
                }
                continue;
            }
            long due = e.getValue().result().popTime() + inflight.invisibleMs();
            if (b.isEmpty()) {
                problems.add(key + " (unacked) never came back (due " + due + ")");
                continue;
            }
            if (b.size() > 1) {
                twice++;
                if (once) {
                    problems.add(key + " came back " + b.size() + " times");
                }
            }
            long l = b.get(0).popped().receivedMs() - due;
            late.add(l);
            if (l < 0) {
                problems.add(key + " came back " + (-l) + " ms before its invisible time ended");
            }
            if (b.get(0).popped().msg().getReconsumeTimes() != 1) {
                problems.add(key + " came back with reconsumeTimes " + b.get(0).popped().msg().getReconsumeTimes());
            }
            if (!b.get(0).ackStatus().equals("OK")) {
                problems.add(key + ": the ack of its retry receipt handle answered " + b.get(0).ackStatus());
            }
        }
        Set<String> unknown = new TreeSet<>(back.keySet());
        unknown.removeAll(inflight.first().keySet());
        if (!unknown.isEmpty()) {
            problems.add("came back, never popped: " + unknown);
        }
        facts.put("expected", expected.size());
        facts.put("back", back.keySet().stream().filter(expected::contains).count());
        facts.put("backMoreThanOnce", twice);
        facts.put("backLate", stats(late));
        check(problems.isEmpty(), problems.size() + " problem(s): " + String.join("; ",
            problems.subList(0, Math.min(12, problems.size()))));
    }

    // ------------------------------------------------------------------------------------------------
    // push consumer in POP mode

    record PGot(String key, long receivedMs, int reconsumeTimes, int queueId, long queueOffset, String topic) {
    }

    private void setPopMode(String topic, String group) throws Exception {
        Class<?> adminType = Pop5.cls("org.apache.rocketmq.tools.admin.DefaultMQAdminExt");
        Object admin = adminType.getConstructor().newInstance();
        Pop5.call(admin, "setNamesrvAddr", namesrv);
        Pop5.call(admin, "setInstanceName", instance("admin"));
        Pop5.call(admin, "start");
        try {
            @SuppressWarnings({"unchecked", "rawtypes"})
            Object pop = Enum.valueOf((Class) Pop5.cls("org.apache.rocketmq.common.message.MessageRequestMode"), "POP");
            Pop5.call(admin, "setMessageRequestMode", brokerAddr, topic, group, pop, QUEUES, 10_000L);
        } finally {
            Pop5.call(admin, "shutdown");
        }
    }

    private void push(String topic, String group, int count, Map<String, Object> facts)
        throws Exception {
        setPopMode(topic, group);
        Map<String, List<PGot>> got = new ConcurrentHashMap<>();
        DefaultMQPushConsumer consumer = FeatureDriver.newPushConsumer(namesrv, group, instance("consumer"));
        Pop5.call(consumer, "setClientRebalance", Boolean.FALSE);
        consumer.setMaxReconsumeTimes(1);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            long now = System.currentTimeMillis();
            boolean later = false;
            for (MessageExt m : msgs) {
                String key = m.getKeys();
                got.computeIfAbsent(key, k -> new CopyOnWriteArrayList<>()).add(new PGot(key, now,
                    m.getReconsumeTimes(), m.getQueueId(), m.getQueueOffset(), m.getTopic()));
                print("PGOT %s %d reconsume=%d q=%d qo=%d", key, now, m.getReconsumeTimes(), m.getQueueId(),
                    m.getQueueOffset());
                later |= key.startsWith("fail-") || (key.startsWith("late-") && m.getReconsumeTimes() == 0);
            }
            return later ? ConsumeConcurrentlyStatus.RECONSUME_LATER : ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.setConsumeMessageBatchMaxSize(1);
        consumer.start();
        shutdowns.add(0, consumer::shutdown);
        Thread.sleep(3000);
        List<String> ok = keys("ok", count);
        List<String> late = keys("late", 4);
        List<String> fail = keys("fail", 2);
        long sendStart = System.currentTimeMillis();
        List<String> all = new ArrayList<>(ok);
        all.addAll(late);
        all.addAll(fail);
        send(topic, all);
        long sent = System.currentTimeMillis();
        long deadline = sent + 60_000;
        while (System.currentTimeMillis() < deadline) {
            boolean done = ok.stream().allMatch(got::containsKey)
                && late.stream().allMatch(k -> got.getOrDefault(k, List.of()).size() >= 2)
                && fail.stream().allMatch(k -> got.getOrDefault(k, List.of()).size() >= 2);
            if (done) {
                break;
            }
            Thread.sleep(200);
        }
        Thread.sleep(SETTLE_MS);
        List<String> problems = new ArrayList<>();
        long missing = ok.stream().filter(k -> !got.containsKey(k)).count();
        long dup = ok.stream().filter(k -> got.getOrDefault(k, List.of()).size() > 1).count();
        if (missing > 0) {
            problems.add(missing + " of " + count + " ok- messages never delivered");
        }
        if (dup > 0) {
            problems.add(dup + " ok- messages delivered more than once");
        }
        List<Long> lateGap = new ArrayList<>();
        for (String k : late) {
            List<PGot> g = got.getOrDefault(k, List.of());
            if (g.size() < 2) {
                problems.add(k + " (RECONSUME_LATER once) delivered " + g.size() + " time(s)");
                continue;
            }
            lateGap.add(g.get(1).receivedMs() - g.get(0).receivedMs());
            if (g.get(1).reconsumeTimes() != 1) {
                problems.add(k + " redelivered with reconsumeTimes " + g.get(1).reconsumeTimes());
            }
            if (g.size() > 2) {
                problems.add(k + " delivered " + g.size() + " times");
            }
        }
        List<String> failSeen = new ArrayList<>();
        for (String k : fail) {
            List<PGot> g = got.getOrDefault(k, List.of());
            failSeen.add(k + "=" + g.stream().map(x -> x.reconsumeTimes() + "@+" + (x.receivedMs() - sendStart)).toList());
            if (g.size() < 2) {
                problems.add(k + " (always RECONSUME_LATER) delivered " + g.size() + " time(s) within "
                    + (deadline - sent) / 1000 + " s");
            }
        }
        facts.put("okDelivered", count - missing);
        facts.put("okDuplicates", dup);
        facts.put("lateRedeliveryGap", stats(lateGap));
        facts.put("failDeliveries", failSeen.toString().replace(' ', '_'));
        cmp("push.late.reconsumeTimes",
            late.stream().map(k -> got.getOrDefault(k, List.of()).stream().map(PGot::reconsumeTimes).toList()).toList());
        cmp("push.fail.reconsumeTimes",
            fail.stream().map(k -> got.getOrDefault(k, List.of()).stream().map(PGot::reconsumeTimes).limit(2).toList()).toList());
        cmp("push.dlq", dlq(group));
        check(problems.isEmpty(), problems.size() + " problem(s): " + String.join("; ",
            problems.subList(0, Math.min(12, problems.size()))));
    }

    /** What the name server routes of the group's DLQ topic, and what it holds. */
    private String dlq(String group) {
        try {
            String topic = "%DLQ%" + group;
            List<MessageQueue> queues = producer().fetchPublishMessageQueues(topic);
            long total = 0;
            for (MessageQueue q : queues) {
                total += producer().maxOffset(q);
            }
            return "routed, " + total + " message(s)";
        } catch (Exception e) {
            return "not routed";
        }
    }

    private static void waitFile(Path file, int seconds) throws Exception {
        long deadline = System.currentTimeMillis() + seconds * 1000L;
        while (!Files.exists(file)) {
            check(System.currentTimeMillis() < deadline, "no " + file + " after " + seconds + " s");
            Thread.sleep(100);
        }
    }

    private void shutdownAll() {
        for (Runnable r : shutdowns) {
            try {
                r.run();
            } catch (RuntimeException e) {
                System.out.println("shutdown: " + e);
            }
        }
    }

}
