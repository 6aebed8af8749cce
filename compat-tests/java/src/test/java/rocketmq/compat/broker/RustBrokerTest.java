package rocketmq.compat.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.stream.Stream;
import org.apache.rocketmq.common.protocol.body.ClusterInfo;
import org.apache.rocketmq.common.protocol.route.BrokerData;
import org.apache.rocketmq.common.protocol.route.QueueData;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import rocketmq.compat.client.DriverRun;
import rocketmq.compat.client.ProduceConsumeRun;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * Our broker ({@code mqbroker}) with the official Java clients 4.9.x and 5.x (both header encodings across
 * the matrix), in child JVMs. One name server under test (ours, or Java's with -Drmq.namesrv=java), one Java
 * name server 5.x and one of our brokers registered with both, for the whole class; the last two tests
 * restart the broker (SIGTERM, then SIGKILL) on the same port and store.
 */
@DisplayName("our broker with the Java clients")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@ExtendWith(DumpLogsOnFailure.class)
class RustBrokerTest {
    static final String CLUSTER = "RustCluster";
    static final String BROKER = "rust-broker-a";
    static final int MESSAGES = 1000;
    private static final Duration REGISTER_TIMEOUT = Duration.ofSeconds(30);
    private static final Duration OFFSET_TIMEOUT = Duration.ofSeconds(20);
    private static final String CLIENT = "rocketmq-client";
    private static final String TOOLS = "rocketmq-tools";

    @TempDir
    static Path dir;
    NameServer namesrv;
    NameServer javaNamesrv;
    RustBroker broker;
    NamesrvProbe probe;
    NamesrvProbe javaProbe;
    BrokerProbe brokerProbe;

    @BeforeAll
    void startNameServersAndBroker() {
        namesrv = NameServer.start(dir.resolve("namesrv"));
        javaNamesrv = NameServer.start(dir.resolve("namesrv-java"), "java");
        broker = RustBroker.start(dir.resolve("broker"), namesrv.address() + ";" + javaNamesrv.address(), CLUSTER, BROKER);
        probe = NamesrvProbe.connect(namesrv.address());
        javaProbe = NamesrvProbe.connect(javaNamesrv.address());
        brokerProbe = BrokerProbe.connect(broker.address(), BROKER);
    }

    @AfterAll
    void stopEverything() {
        for (AutoCloseable c : new AutoCloseable[] {brokerProbe, javaProbe, probe, broker, javaNamesrv, namesrv}) {
            if (c != null) {
                try {
                    c.close();
                } catch (Exception e) {
                    System.out.println("closing " + c + ": " + e);
                }
            }
        }
    }

    // ------------------------------------------------------------------------------------------------
    // client matrices: every scenario with both client lines, the header encodings alternating

    static Stream<Arguments> json49rocketmq5() {
        return Stream.of(Arguments.of(Versions.JAVA_49, "JSON"), Arguments.of(Versions.JAVA_5, "ROCKETMQ"));
    }

    static Stream<Arguments> rocketmq49json5() {
        return Stream.of(Arguments.of(Versions.JAVA_49, "ROCKETMQ"), Arguments.of(Versions.JAVA_5, "JSON"));
    }

    private static String tag(String version, String serializeType) {
        return "c" + version.replace('.', '_') + "_" + serializeType;
    }

    private String diagnostics() {
        return broker.describe(40) + "\n" + namesrv.describe(20);
    }

    private ClusterInfo awaitRegistration(NamesrvProbe p, String which) {
        return Await.until("our broker " + BROKER + " at " + broker.address() + " in the cluster info of the " + which,
            REGISTER_TIMEOUT, p::clusterInfo,
            info -> info.getBrokerAddrTable() != null && info.getBrokerAddrTable().containsKey(BROKER)
                && broker.address().equals(info.getBrokerAddrTable().get(BROKER).getBrokerAddrs().get(0L)),
            this::diagnostics);
    }

    private void assertRouteLeadsToTheBroker(TopicRouteData route) {
        BrokerData data = route.getBrokerDatas().stream().filter(b -> b.getBrokerName().equals(BROKER)).findFirst()
            .orElseThrow(() -> new AssertionError("broker " + BROKER + " not in " + route));
        assertEquals(broker.address(), data.getBrokerAddrs().get(0L), "master address in " + route);
        QueueData queues = route.getQueueDatas().stream().filter(q -> q.getBrokerName().equals(BROKER)).findFirst()
            .orElseThrow(() -> new AssertionError("no queue data of " + BROKER + " in " + route));
        assertTrue(queues.getWriteQueueNums() > 0 && queues.getReadQueueNums() > 0, "queue counts in " + route);
        assertTrue((queues.getPerm() & 2) != 0 && (queues.getPerm() & 4) != 0, "perm must allow read and write: " + route);
    }

    private DriverRun feature(String version, String serializeType, String what, String... steps) {
        String[] args = new String[steps.length + 1];
        args[0] = namesrv.address();
        System.arraycopy(steps, 0, args, 1, steps.length);
        DriverRun run = DriverRun.run("FeatureDriver", CLIENT, version, serializeType,
            dir.resolve("drivers").resolve(what + "-" + tag(version, serializeType) + "-" + System.nanoTime()), args);
        System.out.println("our broker: " + run.summary());
        return run;
    }

    // ------------------------------------------------------------------------------------------------

    @Test
    @Order(1)
    void brokerRegistersWithBothNameServers() throws Exception {
        for (NamesrvProbe p : List.of(probe, javaProbe)) {
            String which = p == probe ? namesrv.kind() + " name server" : "Java name server";
            ClusterInfo info = awaitRegistration(p, which);
            assertEquals(Set.of(BROKER), info.getClusterAddrTable().get(CLUSTER), which + ": cluster -> brokers");
            BrokerData data = info.getBrokerAddrTable().get(BROKER);
            assertEquals(CLUSTER, data.getCluster(), which);
            assertEquals(Map.of(0L, broker.address()), data.getBrokerAddrs(), which);
            assertRouteLeadsToTheBroker(p.route("TBW102"));
        }
    }

    @ParameterizedTest(name = "client {0} with {1} headers")
    @MethodSource("json49rocketmq5")
    @Order(2)
    void thousandMessagesFromSyncProducerToPushConsumer(String version, String serializeType) throws Exception {
        awaitRegistration(probe, "name server");
        String topic = "RustBroker1000_" + tag(version, serializeType);
        ProduceConsumeRun run = ProduceConsumeRun.run(version, serializeType, namesrv.address(), topic, MESSAGES,
            dir.resolve("drivers").resolve("thousand-" + tag(version, serializeType)));
        System.out.println("our broker: " + run.summary());
        String report = run.report() + "\n" + diagnostics();
        assertEquals("OK", run.field("status"), () -> "driver result not OK\n" + report);
        assertEquals(Integer.toString(MESSAGES), run.field("sent"), report);
        assertEquals(Integer.toString(MESSAGES), run.field("received"), report);
        assertEquals("0", run.field("bad"), report);
        assertEquals(0, run.exitCode(), report);
        // the broker registered the auto-created topic: the name server now routes it
        assertRouteLeadsToTheBroker(probe.route(topic));
    }

    /** Async, oneway and batch sends; keys, tags, user properties, ids; a ~4 MiB body; a compressed body. */
    @ParameterizedTest(name = "client {0} with {1} headers")
    @MethodSource("rocketmq49json5")
    @Order(3)
    void sendModesBodiesAndCompression(String version, String serializeType) {
        String t = tag(version, serializeType);
        DriverRun run = feature(version, serializeType, "sends",
            "sendModes:RustModes_" + t, "bigBody:RustBig_" + t, "compressed:RustZip_" + t);
        run.assertOk("sendModes");
        run.assertOk("bigBody");
        run.assertOk("compressed");
        assertEquals(0, run.exitCode(), run.report());
    }

    /** Clustering (8 queues over 2, then 3 consumers) and broadcasting consumers. */
    @ParameterizedTest(name = "client {0} with {1} headers")
    @MethodSource("json49rocketmq5")
    @Order(4)
    void clusteringRebalanceAndBroadcasting(String version, String serializeType) {
        String t = tag(version, serializeType);
        DriverRun run = feature(version, serializeType, "groups",
            "clustering:RustCluster_" + t + ":rust_cluster_group_" + t,
            "broadcasting:RustBroadcast_" + t + ":rust_broadcast_group_" + t);
        run.assertOk("clustering");
        run.assertOk("broadcasting");
        assertEquals(0, run.exitCode(), run.report());
    }

    /** DefaultLitePullConsumer: subscribe mode; assign mode with seek; commitSync read back from the broker. */
    @ParameterizedTest(name = "client {0} with {1} headers")
    @MethodSource("rocketmq49json5")
    @Order(5)
    void litePullConsumer(String version, String serializeType) {
        String t = tag(version, serializeType);
        DriverRun run = feature(version, serializeType, "litepull",
            "litePullSubscribe:RustLiteSub_" + t + ":rust_lite_sub_group_" + t,
            "litePullAssign:RustLiteAssign_" + t + ":rust_lite_assign_group_" + t);
        run.assertOk("litePullSubscribe");
        run.assertOk("litePullAssign");
        assertEquals(0, run.exitCode(), run.report());
    }

    /** DefaultMQAdminExt (rocketmq-tools) queryMessage by key and viewMessage by id: QUERY_MESSAGE, VIEW_MESSAGE_BY_ID. */
    @ParameterizedTest(name = "tools {0} with {1} headers")
    @MethodSource("json49rocketmq5")
    @Order(6)
    void queryByKeyAndViewByIdThroughAdmin(String version, String serializeType) {
        String t = tag(version, serializeType);
        DriverRun run = DriverRun.run("AdminQueryDriver", TOOLS, version, serializeType,
            dir.resolve("drivers").resolve("admin-" + t), namesrv.address(), "RustQuery_" + t);
        System.out.println("our broker: " + run.summary());
        run.assertOk("adminQuery");
        assertEquals(0, run.exitCode(), run.report());
    }

    /** The 1,000-message run again, with the routes coming from the Java name server 5.x. */
    @ParameterizedTest(name = "client {0} with {1} headers")
    @MethodSource("rocketmq49json5")
    @Order(7)
    void thousandMessagesThroughTheJavaNameServer(String version, String serializeType) throws Exception {
        awaitRegistration(javaProbe, "Java name server");
        String topic = "RustBrokerViaJavaNs_" + tag(version, serializeType);
        ProduceConsumeRun run = ProduceConsumeRun.run(version, serializeType, javaNamesrv.address(), topic, MESSAGES,
            dir.resolve("drivers").resolve("java-namesrv-" + tag(version, serializeType)));
        System.out.println("our broker via the Java name server: " + run.summary());
        String report = run.report() + "\n" + diagnostics() + "\n" + javaNamesrv.describe(20);
        assertEquals("OK", run.field("status"), () -> "driver result not OK\n" + report);
        assertEquals(Integer.toString(MESSAGES), run.field("sent"), report);
        assertEquals(Integer.toString(MESSAGES), run.field("received"), report);
        assertEquals(0, run.exitCode(), report);
        assertRouteLeadsToTheBroker(javaProbe.route(topic));
    }

    // ------------------------------------------------------------------------------------------------
    // restarts

    /**
     * A group commits all of 120 messages; the broker stops on SIGTERM (exit 0, unregisters, offsets on
     * disk) and starts again: the queue ends and the committed offsets are the same, and the group, resuming,
     * gets the 60 new messages and none of the 120 again.
     */
    @Test
    @Order(80)
    void committedOffsetsSurviveACleanRestart() throws Exception {
        String version = Versions.JAVA_49;
        String serializeType = "JSON";
        String topic = "RustRestartClean";
        String group = "rust_restart_clean_group";
        DriverRun first = feature(version, serializeType, "clean-1", "produce:" + topic + ":A:120",
            "consume:" + topic + ":" + group + ":A:120");
        first.assertOk("produce");
        first.assertOk("consume");
        int queues = queueCount(topic);
        Map<Integer, Long> ends = maxOffsets(topic, queues);
        assertEquals(120L, ends.values().stream().mapToLong(Long::longValue).sum(), "queue ends " + ends);
        Map<Integer, Long> committed = awaitCommitted(group, topic, ends);

        assertEquals(0, broker.terminate(), "exit code of our broker after SIGTERM\n" + broker.describe(40));
        Await.until("our broker gone from the name server after SIGTERM (UNREGISTER_BROKER)", REGISTER_TIMEOUT,
            probe::clusterInfo, info -> info.getBrokerAddrTable() == null || !info.getBrokerAddrTable().containsKey(BROKER),
            this::diagnostics);
        assertEquals(committed, persistedOffsets(topic, group),
            "consumerOffset.json after a clean stop must hold the committed offsets");

        broker.restart();
        awaitRegistration(probe, "name server");
        assertEquals(ends, maxOffsets(topic, queues), "queue ends after the restart");
        Map<Integer, Long> after = new TreeMap<>();
        for (int q = 0; q < queues; q++) {
            after.put(q, brokerProbe.committedOffset(group, topic, q));
        }
        assertEquals(committed, after, "committed offsets (QUERY_CONSUMER_OFFSET) after the restart");

        DriverRun second = feature(version, serializeType, "clean-2", "produce:" + topic + ":B:60",
            "consume:" + topic + ":" + group + ":B:60");
        second.assertOk("produce");
        second.assertOk("consume");
        List<String> again = second.lines("GOT ").stream().map(w -> w[0]).filter(k -> k.startsWith("A-")).toList();
        assertTrue(again.isEmpty(), "the group got " + again.size() + " of the 120 committed messages again after the "
            + "restart: " + again.subList(0, Math.min(10, again.size())) + "\n" + second.report());
        assertEquals(60, second.lines("GOT ").stream().map(w -> w[0]).distinct().count(), second.report());
        awaitCommitted(group, topic, maxOffsets(topic, queues));
    }

    /**
     * SIGKILL of the broker. Before it: C (100) consumed and its offsets on disk; D (60) consumed, its
     * offsets maybe still only in memory; E (40) sent, not consumed. After the restart: no SEND_OK message
     * is lost (queue ends unchanged), the group resumes at or after the offsets on disk at the kill, gets
     * all of E and of the new F (40), none of C again, and of D at most the tail past the offsets on disk.
     */
    @Test
    @Order(81)
    void messagesAndPersistedOffsetsSurviveAKill() throws Exception {
        String version = Versions.JAVA_5;
        String serializeType = "ROCKETMQ";
        String topic = "RustRestartKill";
        String group = "rust_restart_kill_group";
        awaitRegistration(probe, "name server");
        DriverRun first = feature(version, serializeType, "kill-1", "produce:" + topic + ":C:100",
            "consume:" + topic + ":" + group + ":C:100");
        first.assertOk("produce");
        first.assertOk("consume");
        int queues = queueCount(topic);
        Map<Integer, Long> committedC = awaitCommitted(group, topic, maxOffsets(topic, queues));
        Await.until("offsets of " + topic + "@" + group + " persisted to consumerOffset.json", OFFSET_TIMEOUT,
            () -> persistedOffsets(topic, group), committedC::equals, this::diagnostics);

        DriverRun second = feature(version, serializeType, "kill-2", "produce:" + topic + ":D:60",
            "consume:" + topic + ":" + group + ":D:60", "produce:" + topic + ":E:40");
        second.assertOk("produce");
        second.assertOk("consume");
        second.assertOk("produce#2");
        Map<Integer, Long> endsAtKill = maxOffsets(topic, queues);
        assertEquals(200L, endsAtKill.values().stream().mapToLong(Long::longValue).sum(), "queue ends " + endsAtKill);
        Map<Integer, Long> onDisk = persistedOffsets(topic, group);
        broker.kill();

        broker.restart();
        awaitRegistration(probe, "name server");
        assertEquals(endsAtKill, maxOffsets(topic, queues), "queue ends after SIGKILL and restart (messages lost?)");
        for (int q = 0; q < queues; q++) {
            long c = brokerProbe.committedOffset(group, topic, q);
            assertTrue(c >= onDisk.getOrDefault(q, -1L) && c <= endsAtKill.get(q), "queue " + q + ": committed offset "
                + c + " after the restart, offsets on disk at the kill " + onDisk + ", queue ends " + endsAtKill);
        }

        DriverRun third = feature(version, serializeType, "kill-3", "produce:" + topic + ":F:40",
            "consume:" + topic + ":" + group + ":E,F:80");
        third.assertOk("produce");
        third.assertOk("consume");
        List<String> wrong = new ArrayList<>();
        Set<String> got = new TreeSet<>();
        for (String[] w : third.lines("GOT ")) {
            String key = w[0];
            int queue = Integer.parseInt(w[1]);
            long offset = Long.parseLong(w[2]);
            got.add(key);
            if (key.startsWith("C-") || (key.startsWith("D-") && offset < onDisk.getOrDefault(queue, 0L))) {
                wrong.add(key + "@" + queue + ":" + offset);
            }
        }
        assertTrue(wrong.isEmpty(), "after the kill the group got messages whose offsets were on disk (" + onDisk
            + "): " + wrong.subList(0, Math.min(10, wrong.size())) + "\n" + third.report());
        for (int i = 0; i < 40; i++) {
            assertTrue(got.contains("E-" + i) && got.contains("F-" + i), "E-" + i + " / F-" + i + " not consumed\n" + third.report());
        }
        long redelivered = got.stream().filter(k -> k.startsWith("D-")).count();
        System.out.println("our broker after SIGKILL: offsets on disk " + onDisk + ", redelivered " + redelivered
            + " of the 60 D messages (the uncommitted tail)");
    }

    // ------------------------------------------------------------------------------------------------

    private int queueCount(String topic) throws Exception {
        TopicRouteData route = probe.route(topic);
        assertRouteLeadsToTheBroker(route);
        return route.getQueueDatas().get(0).getReadQueueNums();
    }

    private Map<Integer, Long> maxOffsets(String topic, int queues) throws Exception {
        Map<Integer, Long> ends = new TreeMap<>();
        for (int q = 0; q < queues; q++) {
            ends.put(q, brokerProbe.maxOffset(topic, q));
        }
        return ends;
    }

    /** Polls QUERY_CONSUMER_OFFSET until every queue's committed offset is its end (the client commits every 5 s). */
    private Map<Integer, Long> awaitCommitted(String group, String topic, Map<Integer, Long> ends) {
        return Await.until("group " + group + " committed every queue of " + topic + " to its end " + ends, OFFSET_TIMEOUT,
            () -> {
                Map<Integer, Long> committed = new TreeMap<>();
                for (Integer q : ends.keySet()) {
                    committed.put(q, brokerProbe.committedOffset(group, topic, q));
                }
                return committed;
            }, ends::equals, this::diagnostics);
    }

    /**
     * The queue id -> offset entries of {@code topic@group} in the broker's config/consumerOffset.json
     * (fastjson: {@code "offsetTable":{"T@g":{0:12,1:7}}}), empty if there are none.
     */
    private Map<Integer, Long> persistedOffsets(String topic, String group) throws IOException {
        return rocketmq.compat.ha.StoreFiles.persistedOffsets(broker.storeDir(), topic, group);
    }
}
