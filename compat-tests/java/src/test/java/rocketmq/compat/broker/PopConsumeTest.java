package rocketmq.compat.broker;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import rocketmq.compat.client.DriverRun;
import rocketmq.compat.dledger.DlbNode;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * 5.x pop consumption (POP_MESSAGE, ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME, the revive service, the pop retry
 * topic) through the official 5.3.3 client ({@code driver.PopDriver}), on a Java 5.3.3 broker and on ours with the
 * same checks (Java's side proves the test), and a store with popped, unacked messages handed from Java 5.3.3 to ours
 * and from ours to Java 5.3.3. Every broker is a {@link DlbNode} ({@code timerWheelEnable=true}, Java 5.3.3's
 * default: pop's check points and acks go through the timer), all behind one name server; the five broker chains
 * (Java's, ours, ours with {@code enablePopBufferMerge=true}, the two takeovers) run at once from the class set-up and
 * each test waits for its part.
 *
 * <ul>
 *   <li>{@code *Api}: {@code MQClientAPIImpl.popMessageAsync / ackMessageAsync / changeInvisibleTimeAsync}: 24
 *       messages over 8 queues popped (queueId -1), a third acked, a third given a new invisible time, a third left;
 *       the acked never come back, the others once, not before their (new) invisible time, reconsumeTimes 1, under
 *       the popped topic, acked with the retry receipt handle. PopResult fields and receipt handles checked against
 *       each other ({@code ExtraInfoUtil}); the facts printed as {@code CMP} lines must be Java's.
 *   <li>{@code *Codes}: raw requests that are refused or find nothing: code, remark and header field names as Java's.
 *   <li>{@code *PushPopMode}: {@code setMessageRequestMode(POP)} and a push consumer with {@code
 *       setClientRebalance(false)} (QUERY_ASSIGNMENT): 1,000 messages each once, RECONSUME_LATER brings a message
 *       back (reconsumeTimes 1), one failing every time comes back with reconsumeTimes 0, 1, 2 (the 5.3.3 client
 *       sends no pop message to the DLQ: past maxReconsumeTimes it changes the invisible time again).
 *   <li>{@code *Kill9}: 40 messages popped, half acked, the broker killed (SIGKILL) and started: each unacked one
 *       comes back, no acked one. Run on the takeovers' successors once their takeover is checked (ours after
 *       Java-to-ours, Java's after ours-to-Java), at the same time as the main chains' push consumers.
 *   <li>{@code takeover*}: the same with a clean stop and the other implementation continuing the store: each
 *       unacked one comes back once, after its invisible time; no acked one.
 * </ul>
 */
@DisplayName("5.x pop consumption: Java 5.3.3's and ours; kill -9; store takeover both ways")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class PopConsumeTest {
    static final String JAVA = Versions.JAVA_5;
    /** What plays our broker: "ours" (default) or a Java version (checks the test itself). */
    static final String OURS = System.getProperty("rmq.pop.ours", "ours").trim();
    static final int QUEUES = 8;
    static final int API_COUNT = 24;
    static final long API_INVISIBLE_MS = 5000;
    static final long API_CHANGE_MS = 12_000;
    static final int PUSH_COUNT = 1000;
    static final int INFLIGHT_COUNT = 40;
    static final long KILL_INVISIBLE_MS = 20_000;
    /**
     * How long after the pops and acks the broker is killed: both brokers write the group's pop offsets to
     * {@code config/consumerOffset.json} every flushConsumerOffsetInterval (5 s). Killed before that, Java 5.3.3 hands
     * every message out again from the last offset on disk, as new (reconsumeTimes 0), acked ones too: measured here,
     * 40 of 40 again 4 s after the restart; ours does the same.
     */
    static final long KILL_AFTER_MS = 7000;
    static final long TAKEOVER_INVISIBLE_MS = 20_000;
    static final Duration ROUTE = Duration.ofSeconds(60);
    static final Duration CHAIN_TIMEOUT = Duration.ofMinutes(6);
    static final Duration DRIVER_TIMEOUT = Duration.ofMinutes(4);

    @TempDir
    static Path dir;
    private NameServer namesrv;
    private NamesrvProbe namesrvProbe;
    private final ExecutorService pool = Executors.newCachedThreadPool();
    private Main javaMain;
    private Main ourMain;
    private Main ourMerge;
    private Takeover javaToOurs;
    private Takeover oursToJava;
    private long started;

    static boolean isOurs(String kind) {
        return kind.equals("ours");
    }

    static String who(String kind) {
        return isOurs(kind) ? "our broker" : "Java " + kind + " broker";
    }

    @BeforeAll
    void start() {
        started = System.nanoTime();
        namesrv = NameServer.start(dir.resolve("namesrv"));
        namesrvProbe = NamesrvProbe.connect(namesrv.address());
        javaMain = new Main(JAVA, "java");
        ourMain = new Main(OURS, "ours");
        ourMerge = new Main(OURS, "merge", Map.of("enablePopBufferMerge", "true"));
        javaToOurs = new Takeover(JAVA, OURS, "j2o");
        oursToJava = new Takeover(OURS, JAVA, "o2j");
        for (Chain chain : List.of(javaMain, ourMain, ourMerge, javaToOurs, oursToJava)) {
            pool.submit(() -> {
                try {
                    chain.run();
                } catch (Throwable t) {
                    chain.fail(t);
                } finally {
                    chain.fail(new AssertionError(chain.name + " ended before this part ran"));
                    System.out.printf("[pop] %s done after %d s%n", chain.name, secondsSince(started));
                }
            });
        }
    }

    @AfterAll
    void stop() {
        pool.shutdownNow();
        for (Chain chain : Arrays.asList(javaMain, ourMain, ourMerge, javaToOurs, oursToJava)) {
            if (chain != null) {
                chain.close();
            }
        }
        if (namesrvProbe != null) {
            namesrvProbe.close();
        }
        if (namesrv != null) {
            namesrv.close();
        }
        System.out.printf("[pop] class took %d s%n", secondsSince(started));
    }

    static long secondsSince(long nanos) {
        return Duration.ofNanos(System.nanoTime() - nanos).toSeconds();
    }

    // ------------------------------------------------------------------------------------------------
    // the tests

    @Test
    @DisplayName("Java 5.3.3: pop, ack, changeInvisibleTime through MQClientAPIImpl; revive after the invisible time")
    void javaApi() {
        assertStep(javaMain.api, javaMain.name, "api");
    }

    @Test
    @DisplayName("ours: pop, ack, changeInvisibleTime through MQClientAPIImpl; revive after the invisible time; "
        + "the same facts as Java 5.3.3")
    void oursApi() {
        assertStep(ourMain.api, ourMain.name, "api");
        assertSameFacts("api", "firstPop.", "firstPops.", "ack.", "batchAck.", "change.", "ackAgain.", "revived.");
    }

    @Test
    @DisplayName("Java 5.3.3: codes and remarks of refused pops, acks and changes")
    void javaCodes() {
        assertStep(javaMain.api, javaMain.name, "codes");
    }

    @Test
    @DisplayName("ours: codes and remarks of refused pops, acks and changes as Java 5.3.3's")
    void oursCodes() {
        assertStep(ourMain.api, ourMain.name, "codes");
        assertSameFacts("codes", "code.");
    }

    @Test
    @DisplayName("Java 5.3.3: orderly pops of a queue: blocked while a message is in flight, again after its "
        + "invisible time")
    void javaOrderly() {
        assertStep(javaMain.api, javaMain.name, "orderly");
    }

    @Test
    @DisplayName("ours: orderly pops of a queue as on Java 5.3.3")
    void oursOrderly() {
        assertStep(ourMain.api, ourMain.name, "orderly");
        assertSameFacts("api", "orderly.");
    }

    @Test
    @DisplayName("Java 5.3.3: push consumer in POP mode (setMessageRequestMode, QUERY_ASSIGNMENT)")
    void javaPushPopMode() {
        assertStep(javaMain.push, javaMain.name, "push");
    }

    @Test
    @DisplayName("ours: push consumer in POP mode (setMessageRequestMode, QUERY_ASSIGNMENT) as on Java 5.3.3")
    void oursPushPopMode() {
        assertStep(ourMain.push, ourMain.name, "push");
        assertSameFacts("push", "push.");
    }

    @Test
    @DisplayName("ours with enablePopBufferMerge=true: the client API and the push consumer in POP mode, the same "
        + "facts as Java 5.3.3's (without the merge: it changes what is written, not what clients see)")
    void oursBufferMerge() {
        assertStep(ourMerge.api, ourMerge.name, "api");
        assertStep(ourMerge.push, ourMerge.name, "push");
        assertSameFacts(ourMerge, "api", "firstPop.", "firstPops.", "ack.", "batchAck.", "change.", "ackAgain.", "revived.");
        assertSameFacts(ourMerge, "push", "push.");
    }

    @Test
    @DisplayName("Java 5.3.3: kill -9 with popped messages in flight: each unacked one back, no acked one")
    void javaKill9() {
        assertStep(oursToJava.kill, oursToJava.name, "collect");
    }

    @Test
    @DisplayName("ours: kill -9 with popped messages in flight: each unacked one back, no acked one")
    void oursKill9() {
        assertStep(javaToOurs.kill, javaToOurs.name, "collect");
    }

    @Test
    @DisplayName("takeover: popped, unacked messages on Java 5.3.3's store come back once through ours")
    void takeoverJavaToOurs() {
        assertStep(javaToOurs.done, javaToOurs.name, "collect");
    }

    @Test
    @DisplayName("takeover: popped, unacked messages on our store come back once through Java 5.3.3")
    void takeoverOursToJava() {
        assertStep(oursToJava.done, oursToJava.name, "collect");
    }

    // ------------------------------------------------------------------------------------------------
    // checks

    static <T> T await(CompletableFuture<T> part, String what) {
        try {
            return part.get(CHAIN_TIMEOUT.toSeconds(), TimeUnit.SECONDS);
        } catch (ExecutionException e) {
            Throwable cause = e.getCause();
            if (cause instanceof AssertionError a) {
                throw new AssertionError(what + ": " + a.getMessage(), a);
            }
            throw new AssertionError(what + " failed: " + cause, cause);
        } catch (TimeoutException e) {
            throw new AssertionError(what + ": not done after " + CHAIN_TIMEOUT.toMinutes() + " minutes");
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted", e);
        }
    }

    private static void assertStep(CompletableFuture<DriverRun> part, String name, String step) {
        DriverRun run = await(part, name);
        System.out.printf("[pop] %s %s: %s%n", name, step, run.result(step));
        run.assertOk(step);
    }

    /** The CMP lines (name prefixes given) of our run of {@code what} must equal Java's. */
    private void assertSameFacts(String what, String... prefixes) {
        assertSameFacts(ourMain, what, prefixes);
    }

    private void assertSameFacts(Main ourChain, String what, String... prefixes) {
        Map<String, String> java = cmp(await(javaMain.part(what), javaMain.name), prefixes);
        Map<String, String> ours = cmp(await(ourChain.part(what), ourChain.name), prefixes);
        List<String> differences = new ArrayList<>();
        for (String key : new TreeSet<>(java.keySet())) {
            String j = java.get(key);
            String o = ours.get(key);
            System.out.printf("[pop] %s: Java %s | ours %s%n", key, j, o);
            if (!j.equals(o)) {
                differences.add(key + ": Java 5.3.3 \"" + j + "\", ours \"" + o + "\"");
            }
        }
        for (String key : ours.keySet()) {
            if (!java.containsKey(key)) {
                differences.add(key + ": only ours printed it: " + ours.get(key));
            }
        }
        if (!differences.isEmpty()) {
            fail(what + ": " + differences.size() + " difference(s) from Java 5.3.3:\n  " + String.join("\n  ", differences));
        }
    }

    static Map<String, String> cmp(DriverRun run, String... prefixes) {
        Map<String, String> out = new TreeMap<>();
        for (String[] s : run.lines("CMP ")) {
            for (String p : prefixes) {
                if (s[0].startsWith(p)) {
                    out.put(s[0], String.join(" ", List.of(s).subList(1, s.length)));
                }
            }
        }
        return out;
    }

    // ------------------------------------------------------------------------------------------------
    // the broker chains

    /** One thread of work on a broker folder of its own, completing its parts as it goes. */
    abstract class Chain implements AutoCloseable {
        final String name;
        final List<CompletableFuture<?>> parts = new ArrayList<>();
        final List<AutoCloseable> mine = new ArrayList<>();

        Chain(String name) {
            this.name = name;
        }

        <T> CompletableFuture<T> part() {
            CompletableFuture<T> f = new CompletableFuture<>();
            parts.add(f);
            return f;
        }

        abstract void run() throws Exception;

        void fail(Throwable t) {
            parts.forEach(p -> p.completeExceptionally(t));
        }

        <T extends AutoCloseable> T keep(T c) {
            mine.add(0, c);
            return c;
        }

        DlbNode node(String id, String kind) {
            return node(id, kind, Map.of());
        }

        DlbNode node(String id, String kind, Map<String, String> extra) {
            Map<String, String> keys = new LinkedHashMap<>();
            keys.put("timerWheelEnable", "true");
            keys.putAll(extra);
            DlbNode node = keep(DlbNode.create(dir.resolve(id), namesrv.address(), "PopCluster", "pop-" + id, null, keys));
            startNode(node, kind);
            return node;
        }

        void startNode(DlbNode node, String kind) {
            node.start(kind);
            node.awaitMaster(namesrvProbe, () -> node.describe(60));
        }

        void createTopics(DlbNode node, String... topics) throws Exception {
            for (String topic : topics) {
                node.probe().createTopic(topic, QUEUES);
            }
            for (String topic : topics) {
                Await.until(name + ": route of " + topic, ROUTE, () -> namesrvProbe.route(topic),
                    (TopicRouteData r) -> r != null && !r.getQueueDatas().isEmpty(), () -> node.describe(40));
            }
        }

        DriverRun.Running driver(DlbNode node, String id, String... steps) {
            String[] args = new String[steps.length + 3];
            args[0] = namesrv.address();
            args[1] = node.brokerName();
            args[2] = node.address();
            System.arraycopy(steps, 0, args, 3, steps.length);
            // JSON headers: the ROCKETMQ encoding writes the request code as a short, and pop's codes (200050...) do
            // not fit (200050 goes out as 3442, which both brokers refuse: "request type 3442 not supported").
            return keep(DriverRun.start("PopDriver", "rocketmq-tools", JAVA, "JSON", dir.resolve(id), args));
        }

        /** Waits for the RESULT line of {@code step}; fails unless it is OK. */
        void awaitStep(DriverRun.Running run, String step, Duration timeout) {
            List<String> lines = Await.until(name + ": driver step " + step, timeout, () -> {
                List<String> found = run.lines("RESULT ").stream().map(s -> String.join(" ", s))
                    .filter(l -> l.startsWith("step=" + step + " ")).toList();
                if (found.isEmpty() && !run.isAlive()) {
                    throw new AssertionError("the driver exited before step " + step + "\n" + run.describe(40));
                }
                return found;
            }, found -> !found.isEmpty(), () -> run.describe(40));
            if (!lines.get(0).contains("status=OK")) {
                throw new AssertionError("driver step failed: " + lines.get(0));
            }
        }

        /**
         * Messages popped, half acked, then the broker (running as {@code kind}) killed and started: each unacked one
         * back, no acked one.
         */
        void killScenario(DlbNode node, String kind, String id, CompletableFuture<DriverRun> part) throws Exception {
            String topic = "PopKill_" + id;
            createTopics(node, topic);
            Path go = dir.resolve(id + "-kill/go");
            DriverRun.Running run = driver(node, id + "-kill",
                "inflight:" + topic + ":PopKillGroup_" + id + ":kill:" + INFLIGHT_COUNT + ":" + KILL_INVISIBLE_MS,
                "waitFile:" + go + ":240", "collect:90:atLeastOnce");
            awaitStep(run, "inflight", Duration.ofSeconds(90));
            Thread.sleep(KILL_AFTER_MS);
            long killAt = System.currentTimeMillis();
            node.kill();
            startNode(node, kind);
            System.out.printf("[pop] %s: %s killed and registered again in %d ms%n", name, who(kind),
                System.currentTimeMillis() - killAt);
            touch(go);
            part.complete(run.await(DRIVER_TIMEOUT));
        }

        static void touch(Path file) {
            try {
                Files.createDirectories(file.getParent());
                Files.writeString(file, "go");
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
        }

        @Override
        public void close() {
            for (AutoCloseable c : mine) {
                try {
                    c.close();
                } catch (Exception e) {
                    System.out.println("closing " + c + ": " + e);
                }
            }
        }
    }

    /** One broker (Java's or ours): the client API and the codes, and the push consumer, at once. */
    final class Main extends Chain {
        final String kind;
        final String id;
        final CompletableFuture<DriverRun> api = part();
        final CompletableFuture<DriverRun> push = part();
        final Map<String, String> keys;

        Main(String kind, String id) {
            this(kind, id, Map.of());
        }

        /** {@code keys}: broker.conf keys beyond the chains' own. */
        Main(String kind, String id, Map<String, String> keys) {
            super(who(kind) + " (" + id + ")");
            this.kind = kind;
            this.id = id;
            this.keys = keys;
        }

        CompletableFuture<DriverRun> part(String what) {
            return what.equals("push") ? push : api;
        }

        @Override
        void run() throws Exception {
            DlbNode node = node(id, kind, keys);
            String apiTopic = "PopApi_" + id;
            String codesTopic = "PopCodes_" + id;
            String emptyTopic = "PopEmpty_" + id;
            String pushTopic = "PopPush_" + id;
            String orderTopic = "PopOrder_" + id;
            createTopics(node, apiTopic, codesTopic, emptyTopic, pushTopic, orderTopic);
            DriverRun.Running apiRun = driver(node, id + "-api",
                "api:" + apiTopic + ":PopApiGroup_" + id + ":" + API_COUNT + ":" + API_INVISIBLE_MS + ":" + API_CHANGE_MS,
                "codes:" + codesTopic + ":" + emptyTopic + ":PopCodesGroup_" + id,
                "orderly:" + orderTopic + ":PopOrderGroup_" + id);
            DriverRun.Running pushRun = driver(node, id + "-push", "push:" + pushTopic + ":PopPushGroup_" + id + ":"
                + PUSH_COUNT);
            api.complete(apiRun.await(DRIVER_TIMEOUT));
            push.complete(pushRun.await(DRIVER_TIMEOUT));
        }
    }

    /**
     * Popped, unacked messages on one broker's store, stopped cleanly, continued by the other; then the kill -9 of the
     * successor (the main chains' push consumer runs longest, so the kills run here, at the same time).
     */
    final class Takeover extends Chain {
        final String first;
        final String second;
        final String id;
        final CompletableFuture<DriverRun> done = part();
        final CompletableFuture<DriverRun> kill = part();

        Takeover(String first, String second, String id) {
            super("takeover " + who(first) + " -> " + who(second));
            this.first = first;
            this.second = second;
            this.id = id;
        }

        @Override
        void run() throws Exception {
            DlbNode node = node(id, first);
            String topic = "PopTakeover_" + id;
            createTopics(node, topic);
            Path go = dir.resolve(id + "-driver/go");
            DriverRun.Running run = driver(node, id + "-driver",
                "inflight:" + topic + ":PopTakeoverGroup_" + id + ":tk:" + INFLIGHT_COUNT + ":" + TAKEOVER_INVISIBLE_MS,
                "waitFile:" + go + ":300", "collect:120:once");
            awaitStep(run, "inflight", Duration.ofSeconds(90));
            long handoverAt = System.currentTimeMillis();
            node.stop();
            startNode(node, second);
            System.out.printf("[pop] %s: hand-over took %d ms%n", name, System.currentTimeMillis() - handoverAt);
            touch(go);
            done.complete(run.await(DRIVER_TIMEOUT));
            killScenario(node, second, id, kill);
        }
    }
}
