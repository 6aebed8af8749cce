package rocketmq.compat.dledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import java.util.function.Supplier;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.CleanupMode;
import org.junit.jupiter.api.io.TempDir;
import rocketmq.compat.client.DriverRun;
import rocketmq.compat.ha.Ha;
import rocketmq.compat.ha.StoreFiles;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * Three of our brokers in one DLedger group ({@code enableDLegerCommitLog=true}, Java's keys, 1 MiB data segments)
 * behind our name server, driven by the official Java clients.
 *
 * <ul>
 *   <li>The leader is killed (SIGKILL) in the middle of 10,000 sync sends of the Java 4.9.7 producer (its own retries,
 *   {@code retryTimesWhenSendFailed}) while a Java 5.3.3 push consumer consumes: a new master (brokerId 0) is routed
 *   within {@link DLedgerBrokerGroup#ELECTION}, the producer goes on against it, every SEND_OK message is consumed;
 *   the killed broker restarts and catches up; once all three stopped, their DLedger files are byte-identical up
 *   to the common end and every consume-queue unit of each is a message of that log, the same units on all three.</li>
 *   <li>The whole group stops cleanly, then is killed: each time the topic, the subscription group and the consumer
 *   offsets the consumer committed survive on every broker, the route comes back, and the group resumes where it
 *   committed (nothing below the committed offsets is delivered again); every message is still there for a
 *   new group.</li>
 * </ul>
 *
 * <p>{@code -Drmq.dledger.javaOnly=true} runs the same with Java 4.9.7 brokers in every slot: the assertions describe
 * what Java does, and were checked that way.
 */
@DisplayName("DLedger broker group: three of our brokers, leader killed under load, whole-group restarts")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class DLedgerBrokerGroupTest {
    private static final String CLUSTER = "DLedgerCluster";
    private static final int QUEUES = 4;
    private static final int MESSAGES = 10_000;
    private static final Duration FOLLOW = Duration.ofSeconds(90);

    /** The name server's. */
    @TempDir
    static Path classDir;
    private final String kind = Boolean.getBoolean("rmq.dledger.javaOnly") ? Versions.JAVA_49 : "ours";
    private NameServer namesrv;
    private NamesrvProbe probe;

    @BeforeAll
    void start() {
        namesrv = NameServer.start(classDir.resolve("namesrv"));
        probe = NamesrvProbe.connect(namesrv.address());
    }

    @AfterAll
    void stop() {
        Ha.closeAll(probe, namesrv);
    }

    private long t0 = System.nanoTime();

    /** A line of progress with the seconds since the test began. */
    private void step(String what) {
        System.out.printf("[%6.1f s] %s%n", (System.nanoTime() - t0) / 1e9, what);
    }

    @Test
    @DisplayName("leader killed mid-load: new master routed, no SEND_OK message lost, identical DLedger logs and consume queues")
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void leaderKilledUnderLoad(@TempDir(cleanup = CleanupMode.ON_SUCCESS) Path dir) throws Exception {
        String brokerName = "dlb-failover";
        String topic = "DLedgerFailoverTopic";
        String group = "dlb_failover_group";
        Path drivers = dir.resolve("failover-drivers");
        try (DLedgerBrokerGroup g = new DLedgerBrokerGroup(dir.resolve("failover"), namesrv.address(), probe, CLUSTER,
                 brokerName, List.of(kind, kind, kind), Map.of())) {
            Supplier<String> diag = () -> g.describe() + "\n" + namesrv.describe(20);
            t0 = System.nanoTime();
            g.startAll();
            step("started");
            DLedgerBroker first = g.awaitGroup();
            step("group registered, master " + first);
            g.createTopic(topic, QUEUES);
            step("topic on every broker");
            Path stopConsumer = dir.resolve("failover-stop-consumer");
            try (DriverRun.Running consumer = Ha.start(Versions.JAVA_5, "JSON", namesrv.address(), drivers, "consumer",
                     "consumeLive:" + topic + ":" + group + ":" + stopConsumer + ":200");
                 DriverRun.Running producer = Ha.start(Versions.JAVA_49, "ROCKETMQ", namesrv.address(), drivers, "producer",
                     "warm:" + topic + ":60", "produce:" + topic + ":m:" + MESSAGES + ":4:0:-:false")) {
                Supplier<String> all = () -> diag.get() + "\n" + producer.describe(20) + "\n" + consumer.describe(20);
                Await.until("3,000 SEND_OK", FOLLOW, () -> producer.lines("OK ").size() >= 3000, all);
                DLedgerBroker victim = g.master();
                assertTrue(victim != null && SendLines.storedBy(producer.lines("OK "), victim.address()) > 0,
                    "the sends so far were stored by the master " + victim + " (first master " + first + ")");

                step("killing " + victim);
                victim.kill();
                long killedAt = System.nanoTime();
                int okAtKill = producer.lines("OK ").size();
                DLedgerBroker next = g.awaitNewMaster(victim, DLedgerBrokerGroup.ELECTION);
                long electedMs = (System.nanoTime() - killedAt) / 1_000_000;
                step("new master " + next);
                Await.until("the producer going on with " + next, FOLLOW, () -> SendLines.storedBy(producer.lines("OK "), next.address()) >= 500
                    || !producer.isAlive(), all);

                victim.restart();
                g.awaitGroup();
                step("restarted " + victim);
                DriverRun produced = producer.await(FOLLOW);
                step("producer done");
                produced.assertOk("warm");
                produced.assertOk("produce");
                List<String[]> okLines = produced.lines("OK ");
                Set<String> ok = SendLines.keys(okLines);
                assertTrue(SendLines.storedBy(okLines, next.address()) > 0, "SEND_OK answered by the new master " + next);
                for (String[] w : okLines) {
                    assertEquals(brokerName, w[3], "broker name of SEND_OK " + String.join(" ", w));
                }
                SendLines.awaitConsumed(okLines, consumer, FOLLOW, all);
                Files.createFile(stopConsumer);
                DriverRun consumed = consumer.await(FOLLOW);
                consumed.assertOk("consumeLive");
                List<String[]> got = consumed.lines("GOT ");
                Map<String, Integer> statuses = new TreeMap<>();
                produced.lines("NOTOK ").forEach(w -> statuses.merge(w[1], 1, Integer::sum));
                System.out.println("DLedger failover: " + victim + " killed after " + okAtKill + " SEND_OK; " + next
                    + " routed as master " + electedMs + " ms later; " + ok.size() + " of " + MESSAGES + " SEND_OK ("
                    + SendLines.storedBy(okLines, victim.address()) + " by the killed master, " + SendLines.storedBy(okLines, next.address())
                    + " by the new one), " + produced.lines("FAIL ").size() + " failed, other statuses " + statuses + "; "
                    + got.size() + " deliveries of " + SendLines.keys(got).size() + " messages, all SEND_OK ones among them");
                assertEquals("", SendLines.missing(okLines, got), "SEND_OK messages never consumed");
            }

            step("consumer done");
            g.awaitCaughtUp();
            Map<Integer, Long> ends = g.awaitSameQueueEnds(topic, QUEUES);
            long stored = ends.values().stream().mapToLong(Long::longValue).sum();
            g.stopAll();
            step("stopped");
            System.out.println(g.assertStores(topic, ends, 3) + " (" + stored + " messages)");
        }
    }

    /** The committed offsets of {@code group} on {@code b}, queue by queue. */
    private static Map<Integer, Long> committed(DLedgerBroker b, String group, String topic) throws Exception {
        Map<Integer, Long> c = new TreeMap<>();
        for (int q = 0; q < QUEUES; q++) {
            c.put(q, b.probe().committedOffset(group, topic, q));
        }
        return c;
    }

    private static boolean fileMentions(DLedgerBroker b, String file, String name) throws Exception {
        Path p = b.storeDir().resolve("config").resolve(file);
        return Files.exists(p) && Files.readString(p).contains("\"" + name + "\"");
    }

    /**
     * Waits until every broker answers {@code expected} as the group's committed offsets and holds them, the topic and
     * the subscription group in its config files (a Java slave copies them from its master every 10 s).
     */
    private static void awaitMetadataEverywhere(DLedgerBrokerGroup g, String topic, String group, Map<Integer, Long> expected,
                                                Supplier<String> diag) {
        for (DLedgerBroker b : g.brokers()) {
            Await.until(b.label() + " holding topic " + topic + ", group " + group + " (retryMaxTimes 7) and offsets " + expected
                    + " in memory and in its config files", DLedgerBrokerGroup.REGISTER,
                () -> b.probe().hasTopic(topic) && b.probe().groupRetryMaxTimes(group) == 7
                    && committed(b, group, topic).equals(expected)
                    && StoreFiles.persistedOffsets(b.storeDir(), topic, group).equals(expected)
                    && fileMentions(b, "topics.json", topic) && fileMentions(b, "subscriptionGroup.json", group), diag);
        }
    }

    /** After a restart: the route, and on every broker the topic, the group and the offsets, at once (no copy needed). */
    private static void assertMetadataSurvived(DLedgerBrokerGroup g, String topic, String group, Map<Integer, Long> expected,
                                               String how, Supplier<String> diag) throws Exception {
        Await.until("the route of " + topic + " after " + how, DLedgerBrokerGroup.REGISTER, () -> g.assertOneBrokerNameRouted(topic)
            .getQueueDatas().stream().anyMatch(q -> q.getWriteQueueNums() == QUEUES), diag);
        for (DLedgerBroker b : g.brokers()) {
            assertTrue(b.probe().hasTopic(topic), b.label() + " lost topic " + topic + " after " + how);
            assertEquals(7, b.probe().groupRetryMaxTimes(group), b.label() + ": retryMaxTimes of group " + group + " after " + how);
            assertEquals(expected, committed(b, group, topic), b.label() + ": committed offsets of " + group + " after " + how);
        }
    }

    /**
     * The group resumes: a push consumer of {@code group} runs while {@code count} new messages are sent (all SEND_OK);
     * it gets all of them and nothing below the offsets committed before; returns the new committed offsets, once the
     * master has them all.
     */
    private Map<Integer, Long> resume(Path dir, DLedgerBrokerGroup g, String topic, String group, String prefix, int count,
                                      Map<Integer, Long> committedBefore, String how, Supplier<String> diag) throws Exception {
        Path drivers = dir.resolve("restart-drivers");
        Path stop = dir.resolve("restart-stop-" + prefix);
        List<String[]> got;
        try (DriverRun.Running consumer = Ha.start(Versions.JAVA_49, "ROCKETMQ", namesrv.address(), drivers, "resume-" + prefix,
                 "consumeLive:" + topic + ":" + group + ":" + stop + ":150")) {
            Supplier<String> all = () -> diag.get() + "\n" + consumer.describe(20);
            DriverRun produced = Ha.drive(Versions.JAVA_5, "JSON", namesrv.address(), drivers, "produce-" + prefix,
                "warm:" + topic + ":60", Ha.produceAll(topic, prefix, count, 4));
            produced.assertOk("warm");
            Ha.assertProduced(produced, all);
            SendLines.awaitConsumed(produced.lines("OK "), consumer, FOLLOW, all);
            Files.createFile(stop);
            DriverRun consumed = consumer.await(FOLLOW);
            consumed.assertOk("consumeLive");
            got = consumed.lines("GOT ");
        }
        List<String> again = new ArrayList<>();
        for (String[] w : got) {
            if (Long.parseLong(w[2]) < committedBefore.get(Integer.parseInt(w[1]))) {
                again.add(w[0] + "@" + w[1] + ":" + w[2]);
            }
        }
        assertTrue(again.isEmpty(), "after " + how + " the group went back below the offsets it had committed " + committedBefore
            + ": " + again.subList(0, Math.min(10, again.size())) + " (" + again.size() + " of " + got.size() + " deliveries)");
        System.out.println("DLedger restart: after " + how + " the group resumed at " + committedBefore + ": " + got.size()
            + " deliveries, none below");
        DLedgerBroker master = g.awaitGroup();
        Map<Integer, Long> ends = g.awaitSameQueueEnds(topic, QUEUES);
        return Await.until("the consumer's offsets committed to " + master + " up to the queue ends " + ends, FOLLOW,
            () -> committed(master, group, topic), ends::equals, diag);
    }

    @Test
    @DisplayName("whole group stopped cleanly, then killed: topic, group and committed offsets survive, consumers resume")
    @Timeout(value = 240, unit = TimeUnit.SECONDS)
    void wholeGroupRestarts(@TempDir(cleanup = CleanupMode.ON_SUCCESS) Path dir) throws Exception {
        String brokerName = "dlb-restart";
        String topic = "DLedgerRestartTopic";
        String group = "dlb_restart_group";
        Path drivers = dir.resolve("restart-drivers");
        try (DLedgerBrokerGroup g = new DLedgerBrokerGroup(dir.resolve("restart"), namesrv.address(), probe, CLUSTER,
                 brokerName, List.of(kind, kind, kind), Map.of())) {
            Supplier<String> diag = () -> g.describe() + "\n" + namesrv.describe(20);
            t0 = System.nanoTime();
            g.startAll();
            step("started");
            DLedgerBroker master = g.awaitGroup();
            step("group registered, master " + master);
            g.createTopic(topic, QUEUES);
            master.probe().createGroup(group, 7);
            step("topic on every broker");

            // 1,000 messages, consumed by the group, which commits its offsets to the master.
            DriverRun produced = Ha.drive(Versions.JAVA_49, "JSON", namesrv.address(), drivers, "produce-b0",
                "warm:" + topic + ":60", Ha.produceAll(topic, "b0", 1000, 4));
            produced.assertOk("warm");
            Ha.assertProduced(produced, diag);
            Ha.drive(Versions.JAVA_5, "ROCKETMQ", namesrv.address(), drivers, "consume-b0",
                "consume:" + topic + ":" + group + ":b0:1000:120").assertOk("consume");
            Map<Integer, Long> ends = g.awaitSameQueueEnds(topic, QUEUES);
            Map<Integer, Long> committed = Await.until("the consumer's offsets committed to " + master + " up to " + ends, FOLLOW,
                () -> committed(master, group, topic), ends::equals, diag);
            step("produced and consumed");
            awaitMetadataEverywhere(g, topic, group, committed, diag);
            step("metadata on every broker");

            // A clean stop of all three, and a start.
            g.stopAll();
            step("stopped");
            g.startAll();
            step("started");
            g.awaitGroup();
            step("group registered");
            assertMetadataSurvived(g, topic, group, committed, "a clean stop of the group", diag);
            assertEquals(ends, g.awaitSameQueueEnds(topic, QUEUES), "queue ends after a clean stop of the group");
            committed = resume(dir, g, topic, group, "b1", 300, committed, "a clean stop of the group", diag);
            step("resumed");
            awaitMetadataEverywhere(g, topic, group, committed, diag);
            step("metadata on every broker");
            ends = committed;

            // SIGKILL to all three, and a start.
            g.killAll();
            g.startAll();
            step("killed and started");
            g.awaitGroup();
            step("group registered");
            assertMetadataSurvived(g, topic, group, committed, "a SIGKILL of the group", diag);
            assertEquals(ends, g.awaitSameQueueEnds(topic, QUEUES), "queue ends after a SIGKILL of the group");
            resume(dir, g, topic, group, "b2", 200, committed, "a SIGKILL of the group", diag);
            step("resumed");

            // Every message is still there for a new group.
            DriverRun fresh = Ha.drive(Versions.JAVA_49, "JSON", namesrv.address(), drivers, "consume-all",
                "consume:" + topic + ":dlb_fresh_b0:b0:1000:120", "consume:" + topic + ":dlb_fresh_b1:b1:300:120",
                "consume:" + topic + ":dlb_fresh_b2:b2:200:120");
            fresh.assertOk("consume");
            fresh.assertOk("consume#2");
            fresh.assertOk("consume#3");
            step("all read by new groups");

            g.awaitCaughtUp();
            Map<Integer, Long> last = g.awaitSameQueueEnds(topic, QUEUES);
            g.stopAll();
            step("stopped");
            System.out.println(g.assertStores(topic, last, 1));
        }
    }
}
