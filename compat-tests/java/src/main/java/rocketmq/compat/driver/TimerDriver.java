package rocketmq.compat.driver;

import static rocketmq.compat.driver.Steps.check;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Child-JVM driver for 5.x timer messages ({@code TimerMessageTest}). Compiled against the 4.9.7 client API; the
 * timer calls of the 5.3.3 client ({@code Message.setDeliverTimeMs/setDelayTimeSec/setDelayTimeMs},
 * {@code SendResult.getRecallHandle}, {@code DefaultMQProducer.recallMessage}) are made reflectively, so it must run
 * with a 5.x client classpath. Usage: {@code TimerDriver <namesrvAddr> <step> [<step> ...]}, a step being
 * {@code name:arg:arg...}:
 *
 * <ul>
 *   <li>{@code consumer:TOPIC:GROUP} starts a push consumer of GROUP (from the first offset) and returns; until the
 *       driver ends it prints, for every delivery as it comes,
 *       {@code GOT key receivedMs storeTimestamp topic queueId queueOffset reconsumeTimes intact msgId}
 *       ({@code intact} is {@code ok} or what differs from what {@code send} sent: body, tags, keys, user properties)
 *       and {@code PROPS key {k=v, ...}} (every property the delivered message carries, sorted, to the end of the line).
 *   <li>{@code send:TOPIC:PREFIX:MODE:COUNT:FROM_MS:TO_MS[:THREADS]} COUNT sync sends (keys {@code PREFIX-i}), message i
 *       due {@code FROM_MS + (TO_MS - FROM_MS) * i / COUNT} ms after its send: MODE {@code deliverMs}
 *       ({@code setDeliverTimeMs(now + delay)}), {@code delaySec} ({@code setDelayTimeSec(delay / 1000)}) or
 *       {@code delayMs} ({@code setDelayTimeMs(delay)}). Prints
 *       {@code SENT key mode dueLowMs dueHighMs sendStartMs sendEndMs queueId msgId recallHandle} for each: the
 *       time asked is at least dueLowMs (the send's start plus the delay; for deliverMs the exact time asked) and at
 *       most dueHighMs (the send's end plus the delay). Fails unless every send is SEND_OK.
 *   <li>{@code recall:TOPIC:PREFIX:DELAY_MS[:refused]} sends {@code PREFIX-control} and {@code PREFIX-recalled} with
 *       {@code setDelayTimeMs(DELAY_MS)} (both SENT lines), then {@code recallMessage(TOPIC, handle)} of the second
 *       with the recall handle its send result carries; prints {@code RECALLED key returnedMsgId}, or for a refusal
 *       {@code RECALL_REFUSED key code remark...} and fails. With {@code refused} (a broker with
 *       {@code recallMessageEnable=false}, Java's default) only {@code PREFIX-recalled} is sent, and the step fails
 *       unless the recall is refused.
 *   <li>{@code refused:TOPIC:KEY:MODE:DELAY_MS} one send that must be refused: prints
 *       {@code REFUSED key code remark...} (MQBrokerException's response code and the broker's remark, to the end of
 *       the line), or {@code ACCEPTED key ...} and fails.
 *   <li>{@code waitFile:PATH:SECONDS} waits until PATH exists (the test's go-ahead).
 *   <li>{@code hold:STOPFILE:SECONDS} prints {@code HOLDING}, keeps every client running until STOPFILE exists (or
 *       SECONDS passed), then shuts them down.
 * </ul>
 *
 * Bodies, tags, keys and user properties are functions of the key, so the consumer checks what arrives.
 */
public final class TimerDriver {
    static final String TAGS = "TagTimer";
    static final String UNICODE_VALUE = "gr\u00fc\u00dfe \u20ac \u6d88\u606f";

    private final String namesrv;
    private final String runId = UUID.randomUUID().toString().substring(0, 8);
    private final AtomicInteger instances = new AtomicInteger();
    private final List<Runnable> shutdowns = new ArrayList<>();
    private DefaultMQProducer producer;

    private TimerDriver(String namesrv) {
        this.namesrv = namesrv;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: TimerDriver <namesrvAddr> <step> [<step> ...]");
            System.exit(2);
        }
        TimerDriver driver = new TimerDriver(args[0]);
        Steps.printClient(driver.runId);
        boolean allOk = true;
        for (String step : Arrays.asList(args).subList(1, args.length)) {
            String[] s = step.split(":");
            allOk &= Steps.report(s[0], facts -> driver.run(s, facts));
        }
        driver.shutdownAll();
        System.out.flush();
        System.exit(allOk ? 0 : 1);
    }

    private void run(String[] s, Map<String, Object> facts) throws Exception {
        switch (s[0]) {
            case "consumer" -> consumer(s[1], s[2], facts);
            case "send" -> send(s[1], s[2], s[3], Integer.parseInt(s[4]), Long.parseLong(s[5]), Long.parseLong(s[6]),
                s.length > 7 ? Integer.parseInt(s[7]) : 1, facts);
            case "recall" -> recall(s[1], s[2], Long.parseLong(s[3]), s.length > 4 && s[4].equals("refused"), facts);
            case "refused" -> refused(s[1], s[2], s[3], Long.parseLong(s[4]), facts);
            case "waitFile" -> waitFile(Path.of(s[1]), Integer.parseInt(s[2]), facts);
            case "hold" -> hold(Path.of(s[1]), Integer.parseInt(s[2]), facts);
            default -> throw new Steps.Failure("unknown step " + s[0]);
        }
    }

    private String instance(String what) {
        return what + "-" + runId + "-" + instances.incrementAndGet();
    }

    private DefaultMQProducer producer() throws Exception {
        if (producer == null) {
            producer = FeatureDriver.newProducer(namesrv, "timer_producer_" + runId, instance("producer"));
            // A refusal is an answer to check, not something to retry elsewhere.
            producer.setRetryTimesWhenSendFailed(0);
            producer.start();
            shutdowns.add(0, producer::shutdown);
        }
        return producer;
    }

    // ------------------------------------------------------------------------------------------------
    // what a message carries

    static String secondKey(String key) {
        return "second-" + key;
    }

    static byte[] body(String key) {
        return ("timer body of " + key + " \u00e9\u00e8 ").repeat(8).getBytes(StandardCharsets.UTF_8);
    }

    static Message message(String topic, String key, String mode) {
        Message msg = new Message(topic, TAGS, key + " " + secondKey(key), body(key));
        msg.putUserProperty("timerCase", mode);
        msg.putUserProperty("note", UNICODE_VALUE);
        msg.putUserProperty("keyAgain", key);
        return msg;
    }

    /** "ok", or what differs between a delivered message and what {@link #message} built for its key. */
    static String intact(MessageExt m, String key) {
        List<String> problems = new ArrayList<>();
        if (!Arrays.equals(m.getBody(), body(key))) {
            problems.add("body(" + (m.getBody() == null ? "null" : m.getBody().length + "B") + ")");
        }
        if (!TAGS.equals(m.getTags())) {
            problems.add("tags=" + m.getTags());
        }
        if (!(key + " " + secondKey(key)).equals(m.getKeys())) {
            problems.add("keys=" + m.getKeys());
        }
        if (!UNICODE_VALUE.equals(m.getUserProperty("note"))) {
            problems.add("note=" + m.getUserProperty("note"));
        }
        if (!key.equals(m.getUserProperty("keyAgain"))) {
            problems.add("keyAgain=" + m.getUserProperty("keyAgain"));
        }
        if (m.getUserProperty("timerCase") == null) {
            problems.add("timerCase=null");
        }
        return problems.isEmpty() ? "ok" : String.join(",", problems).replace(' ', '_');
    }

    // ------------------------------------------------------------------------------------------------
    // the 5.x client calls, reflectively

    private static Object call(Object target, String name, Class<?>[] types, Object... args) throws Exception {
        Method method;
        try {
            method = target.getClass().getMethod(name, types);
        } catch (NoSuchMethodException e) {
            throw new Steps.Failure(target.getClass().getSimpleName() + "." + name
                + " is missing: this driver needs a 5.x client classpath");
        }
        try {
            return method.invoke(target, args);
        } catch (InvocationTargetException e) {
            if (e.getCause() instanceof Exception cause) {
                throw cause;
            }
            throw e;
        }
    }

    /** Asks for delivery {@code delayMs} from now (deliverMs: from {@code nowMs}) the way MODE says. */
    static void setTimer(Message msg, String mode, long delayMs, long nowMs) throws Exception {
        switch (mode) {
            case "deliverMs" -> call(msg, "setDeliverTimeMs", new Class<?>[] {long.class}, nowMs + delayMs);
            case "delaySec" -> call(msg, "setDelayTimeSec", new Class<?>[] {long.class}, delayMs / 1000);
            case "delayMs" -> call(msg, "setDelayTimeMs", new Class<?>[] {long.class}, delayMs);
            default -> throw new Steps.Failure("unknown timer mode " + mode);
        }
    }

    static String recallHandle(SendResult r) throws Exception {
        Object handle = call(r, "getRecallHandle", new Class<?>[0]);
        return handle == null ? null : handle.toString();
    }

    // ------------------------------------------------------------------------------------------------
    // steps

    private void consumer(String topic, String group, Map<String, Object> facts) throws Exception {
        DefaultMQPushConsumer consumer = FeatureDriver.newPushConsumer(namesrv, group, instance("consumer"));
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            long now = System.currentTimeMillis();
            for (MessageExt m : msgs) {
                String key = FeatureDriver.firstKey(m);
                String k = key == null ? "-" : key;
                String props = new TreeMap<>(m.getProperties()).toString().replace('\n', ' ');
                synchronized (System.out) {
                    System.out.printf("GOT %s %d %d %s %d %d %d %s %s%n", k, now, m.getStoreTimestamp(), m.getTopic(),
                        m.getQueueId(), m.getQueueOffset(), m.getReconsumeTimes(), key == null ? "no-key" : intact(m, key),
                        m.getMsgId());
                    System.out.printf("PROPS %s %s%n", k, props);
                    System.out.flush();
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        shutdowns.add(0, consumer::shutdown);
        facts.put("group", group);
    }

    private record Sent(String line, String failure) {
    }

    private Sent sendOne(String topic, String key, String mode, long delayMs) {
        try {
            Message msg = message(topic, key, mode);
            long start = System.currentTimeMillis();
            setTimer(msg, mode, delayMs, start);
            SendResult r = producer().send(msg);
            long end = System.currentTimeMillis();
            if (r.getSendStatus() != SendStatus.SEND_OK) {
                return new Sent(null, key + ": " + r.getSendStatus());
            }
            long dueLow = start + delayMs;
            long dueHigh = mode.equals("deliverMs") ? dueLow : end + delayMs;
            String handle = recallHandle(r);
            return new Sent(String.format("SENT %s %s %d %d %d %d %d %s %s", key, mode, dueLow, dueHigh, start, end,
                r.getMessageQueue().getQueueId(), r.getMsgId(), handle == null ? "-" : handle), null);
        } catch (Exception e) {
            MQBrokerException refusal = refusal(e);
            if (refusal != null) {
                return new Sent(null, key + ": refused with " + refusal.getResponseCode() + " " + refusal.getErrorMessage());
            }
            return new Sent(null, key + ": " + e);
        }
    }

    private void send(String topic, String prefix, String mode, int count, long fromMs, long toMs, int threads,
                      Map<String, Object> facts) throws Exception {
        ExecutorService pool = Executors.newFixedThreadPool(threads);
        List<Future<Sent>> sent = new ArrayList<>();
        try {
            producer();
            for (int i = 0; i < count; i++) {
                String key = prefix + "-" + i;
                long delay = fromMs + (toMs - fromMs) * i / count;
                sent.add(pool.submit(() -> sendOne(topic, key, mode, delay)));
            }
            List<String> failures = new ArrayList<>();
            for (Future<Sent> f : sent) {
                Sent s = f.get();
                if (s.line() != null) {
                    System.out.println(s.line());
                } else {
                    failures.add(s.failure());
                }
            }
            System.out.flush();
            facts.put("sent", count - failures.size());
            if (!failures.isEmpty()) {
                throw new Steps.Failure(failures.size() + " of " + count + " sends failed, first: " + failures.get(0));
            }
        } finally {
            pool.shutdownNow();
        }
    }

    /**
     * The broker's refusal behind a send's exception: the MQBrokerException itself, or the one a retryable code
     * (SYSTEM_ERROR...) left as the cause of the client's "Send [n] times, still failed" MQClientException.
     */
    static MQBrokerException refusal(Throwable e) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t instanceof MQBrokerException b) {
                return b;
            }
        }
        return null;
    }

    private void recall(String topic, String prefix, long delayMs, boolean expectRefusal, Map<String, Object> facts)
        throws Exception {
        if (!expectRefusal) {
            Sent control = sendOne(topic, prefix + "-control", "delayMs", delayMs);
            check(control.line() != null, "control send: " + control.failure());
            System.out.println(control.line());
        }
        String key = prefix + "-recalled";
        Message msg = message(topic, key, "delayMs");
        long start = System.currentTimeMillis();
        setTimer(msg, "delayMs", delayMs, start);
        SendResult r;
        try {
            r = producer().send(msg);
        } catch (Exception e) {
            MQBrokerException refusal = refusal(e);
            throw refusal == null ? e : new Steps.Failure("send of the message to recall refused with "
                + refusal.getResponseCode() + " " + refusal.getErrorMessage());
        }
        long end = System.currentTimeMillis();
        check(r.getSendStatus() == SendStatus.SEND_OK, "send of the message to recall: " + r);
        String handle = recallHandle(r);
        System.out.printf("SENT %s delayMs %d %d %d %d %d %s %s%n", key, start + delayMs, end + delayMs, start, end,
            r.getMessageQueue().getQueueId(), r.getMsgId(), handle == null ? "-" : handle);
        check(handle != null, "the send result carries no recall handle: " + r);
        try {
            Object id = call(producer(), "recallMessage", new Class<?>[] {String.class, String.class}, topic, handle);
            System.out.printf("RECALLED %s %s%n", key, id);
            facts.put("returnedMsgId", id);
            facts.put("sentMsgId", r.getMsgId());
            check(!expectRefusal, "recalled, a refusal was expected");
        } catch (Exception e) {
            MQBrokerException refusal = refusal(e);
            if (refusal == null) {
                throw e;
            }
            System.out.printf("RECALL_REFUSED %s %d %s%n", key, refusal.getResponseCode(), refusal.getErrorMessage());
            facts.put("code", refusal.getResponseCode());
            if (!expectRefusal) {
                throw new Steps.Failure("recall refused: " + refusal.getResponseCode() + " " + refusal.getErrorMessage());
            }
        } finally {
            System.out.flush();
        }
    }

    private void refused(String topic, String key, String mode, long delayMs, Map<String, Object> facts) throws Exception {
        Message msg = message(topic, key, mode);
        setTimer(msg, mode, delayMs, System.currentTimeMillis());
        try {
            SendResult r = producer().send(msg);
            System.out.printf("ACCEPTED %s %s %s%n", key, r.getSendStatus(), r.getMsgId());
            throw new Steps.Failure("accepted: " + r);
        } catch (Exception e) {
            MQBrokerException refusal = refusal(e);
            if (refusal == null) {
                throw e;
            }
            System.out.printf("REFUSED %s %d %s%n", key, refusal.getResponseCode(), refusal.getErrorMessage());
            facts.put("code", refusal.getResponseCode());
        } finally {
            System.out.flush();
        }
    }

    private static void waitFile(Path file, int seconds, Map<String, Object> facts) throws Exception {
        long deadline = System.currentTimeMillis() + seconds * 1000L;
        while (!Files.exists(file)) {
            check(System.currentTimeMillis() < deadline, "no " + file + " after " + seconds + " s");
            Thread.sleep(100);
        }
    }

    private static void hold(Path stopFile, int seconds, Map<String, Object> facts) throws Exception {
        System.out.println("HOLDING");
        System.out.flush();
        long deadline = System.currentTimeMillis() + seconds * 1000L;
        while (!Files.exists(stopFile) && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        facts.put("stopped", Files.exists(stopFile) ? "by the test" : "after " + seconds + " s");
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
