package rocketmq.compat.ha;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
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
import rocketmq.compat.client.DriverRun;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * Our SYNC_MASTER and our slave (1 MiB commit-log segments) behind our name server, with the official Java
 * producer: 10,000 sends all SEND_OK and, after both stopped cleanly, the slave's commit log and consume
 * queues are the master's byte for byte; then both restart on their stores, the slave resumes from its end,
 * falls more than a segment behind while stopped, and catches up.
 *
 * <p>{@code -Drmq.ha.pair=4.9.7} (or 5.3.3) runs the same class with a Java master and a Java slave of that
 * version: the assertions describe what Java does, and were checked that way.
 */
@DisplayName("our master and our slave: SYNC_MASTER, identical stores, restarts, catch-up")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@ExtendWith(DumpLogsOnFailure.class)
class PairReplicationTest {
    private static final String CLUSTER = "HaPairCluster";
    private static final String BROKER = "ha-pair";
    private static final String TOPIC = "HaPairTopic";
    private static final int QUEUES = 4;
    private static final int MESSAGES = 10_000;
    private static final int THREADS = 8;

    @TempDir
    static Path dir;
    private final String kind = System.getProperty("rmq.ha.pair", "ours");
    private NameServer namesrv;
    private NamesrvProbe probe;
    private HaNode master;
    private HaNode slave;

    @BeforeAll
    void start() {
        namesrv = NameServer.start(dir.resolve("namesrv"));
        probe = NamesrvProbe.connect(namesrv.address());
        master = HaNode.master(kind, dir.resolve("master"), namesrv.address(), CLUSTER, BROKER, "SYNC_MASTER", Map.of());
        slave = HaNode.slave(kind, dir.resolve("slave"), namesrv.address(), CLUSTER, BROKER, Map.of());
    }

    @AfterAll
    void stop() {
        Ha.closeAll(probe, slave, master, namesrv);
    }

    private String diagnostics() {
        return Ha.describe(master, slave) + "\n" + namesrv.describe(20);
    }

    private DriverRun drive(String what, String... steps) {
        return Ha.drive(Versions.JAVA_49, "JSON", namesrv.address(), dir.resolve("drivers"), what, steps);
    }

    private Map<Integer, Long> assertSameQueueEnds() throws Exception {
        Map<Integer, Long> ends = Ha.queueEnds(master, TOPIC, QUEUES);
        assertEquals(ends, Ha.queueEnds(slave, TOPIC, QUEUES), "queue ends of " + TOPIC + ": master, then slave");
        return ends;
    }

    @Test
    @Order(1)
    void tenThousandSyncMasterSendsAreSendOkAndTheStoresAreIdentical() throws Exception {
        Ha.awaitGroupRegistered(probe, master, slave, this::diagnostics);
        DriverRun run = drive("produce-10000", "warm:" + TOPIC + "Warm:60", Ha.produceAll(TOPIC, "m", MESSAGES, THREADS));
        run.assertOk("warm");
        Ha.assertProduced(run);
        long end = Ha.awaitCaughtUp(master, slave, this::diagnostics);
        Map<Integer, Long> ends = assertSameQueueEnds();
        assertEquals(MESSAGES, ends.values().stream().mapToLong(Long::longValue).sum(), "messages in " + TOPIC + ": " + ends);
        assertTrue(end > 3L * HaNode.SEGMENT, "10,000 messages should fill more than 3 segments of 1 MiB: " + end);

        slave.stop();
        master.stop();
        long from = Ha.assertReplica(master, slave, end, TOPIC, ends);
        assertEquals(0, from, "the slave joined before any data, so it holds the master's log from 0");
    }

    @Test
    @Order(2)
    void aSlaveRestartedOnItsStoreResumesAndOneMoreThanASegmentBehindCatchesUp() throws Exception {
        master.restart();
        slave.restart();
        Ha.awaitGroupRegistered(probe, master, slave, this::diagnostics);
        // Restarted on its store, the slave reports its end and goes on from there: SYNC_MASTER sends are OK again.
        DriverRun resumed = drive("produce-after-restart", "warm:" + TOPIC + "Warm:60", Ha.produceAll(TOPIC, "n", 2000, THREADS));
        resumed.assertOk("warm");
        Ha.assertProduced(resumed);
        long slaveEnd = Ha.awaitCaughtUp(master, slave, this::diagnostics);

        // With the slave away, a SYNC_MASTER stores each message and answers SLAVE_NOT_AVAILABLE at once (4.9;
        // a 5.3.3 master with inSyncReplicas=2 waits slaveTimeout, 3 s, and answers FLUSH_SLAVE_TIMEOUT).
        boolean java5 = kind.startsWith("5.");
        String expected = java5 ? "FLUSH_SLAVE_TIMEOUT" : "SLAVE_NOT_AVAILABLE";
        slave.stop();
        DriverRun away = drive("produce-slave-away", "produce:" + TOPIC + ":o:6000:" + (java5 ? 100 : THREADS) + ":0:-:false");
        Ha.assertProduced(away);
        List<String[]> notOk = away.lines("NOTOK ");
        assertTrue(away.lines("FAIL ").isEmpty(), "sends failed with the slave away: "
            + away.lines("FAIL ").stream().limit(5).map(w -> String.join(" ", w)).toList());
        Map<String, Integer> statuses = new TreeMap<>();
        notOk.forEach(w -> statuses.merge(w[1], 1, Integer::sum));
        assertEquals(Map.of(expected, 6000), statuses, "send statuses with the slave away\n" + away.summary());
        long masterEnd = master.probe().commitLogMaxOffset();
        assertTrue(masterEnd - slaveEnd > HaNode.SEGMENT, "the slave must be more than a segment behind: master at "
            + masterEnd + ", slave at " + slaveEnd);

        slave.restart();
        Ha.awaitGroupRegistered(probe, master, slave, this::diagnostics);
        long caughtUp = Ha.awaitCaughtUp(master, slave, this::diagnostics);
        assertTrue(caughtUp >= masterEnd, "caught up to " + caughtUp + " < " + masterEnd);
        DriverRun after = drive("produce-caught-up", Ha.produceAll(TOPIC, "p", 1000, THREADS));
        Ha.assertProduced(after);
        long end = Ha.awaitCaughtUp(master, slave, this::diagnostics);
        Map<Integer, Long> ends = assertSameQueueEnds();
        assertEquals(MESSAGES + 2000 + 6000 + 1000, ends.values().stream().mapToLong(Long::longValue).sum(),
            "messages in " + TOPIC + ": " + ends);

        slave.stop();
        master.stop();
        long from = Ha.assertReplica(master, slave, end, TOPIC, ends);
        assertEquals(0, from, "the restarted slave kept its log from 0");
    }
}
