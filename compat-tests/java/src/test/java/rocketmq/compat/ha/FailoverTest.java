package rocketmq.compat.ha;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import org.apache.rocketmq.common.protocol.route.BrokerData;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import rocketmq.compat.client.DriverRun;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * Failover as a user sees it, with our SYNC_MASTER, our slave and our name server: a Java producer (5.3.3)
 * sends steadily and a Java push consumer (4.9.7) consumes, then pauses so that a backlog builds on the broker;
 * the master is killed (SIGKILL) mid-load and the consumer resumes. Every message the producer saw SEND_OK is
 * then consumed, the backlog from the slave, while the master is down, and the
 * consumer commits its offsets to the slave; the master restarts on its store, the slave follows it again,
 * the producer's later sends are consumed too, and no delivery after the restart goes back below the offsets
 * committed during the outage. Finally both stop and the slave's commit log is still the master's.
 *
 * <p>{@code -Drmq.ha.failover=4.9.7} runs the same with a Java 4.9.7 master and slave: the assertions describe
 * what Java does, and were checked that way.
 */
@DisplayName("failover: master killed under load, consumers read the slave, the master comes back")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class FailoverTest {
    private static final String CLUSTER = "HaFailoverCluster";
    private static final String BROKER = "ha-failover";
    private static final String TOPIC = "HaFailoverTopic";
    private static final String GROUP = "ha_failover_group";
    private static final int QUEUES = 4;
    private static final Duration FOLLOW = Duration.ofSeconds(60);

    @TempDir
    static Path dir;
    private final String kind = System.getProperty("rmq.ha.failover", "ours");
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

    private static Set<String> keys(List<String[]> lines) {
        Set<String> keys = new HashSet<>();
        lines.forEach(w -> keys.add(w[0]));
        return keys;
    }

    private static List<String> missing(Set<String> wanted, Set<String> got) {
        List<String> out = new ArrayList<>();
        for (String k : wanted) {
            if (!got.contains(k)) {
                out.add(k);
            }
        }
        return out;
    }

    private boolean masterRouted(boolean present) throws Exception {
        for (BrokerData b : probe.route(TOPIC).getBrokerDatas()) {
            if (b.getBrokerName().equals(BROKER)) {
                return b.getBrokerAddrs().containsKey(0L) == present && b.getBrokerAddrs().containsKey(1L);
            }
        }
        return false;
    }

    @Test
    void everySendOkMessageIsConsumedFromTheSlaveWhileTheMasterIsDownAndNothingIsReplayedAfterItReturns() throws Exception {
        Ha.awaitGroupRegistered(probe, master, slave, this::diagnostics);
        master.probe().createTopic(TOPIC, QUEUES);
        Await.until("our slave copying topic " + TOPIC, FOLLOW, () -> slave.probe().hasTopic(TOPIC), this::diagnostics);
        Await.until("the route of " + TOPIC + " with master and slave", FOLLOW, () -> masterRouted(true), this::diagnostics);
        Path stopProducer = dir.resolve("stop-producer");
        Path stopConsumer = dir.resolve("stop-consumer");
        Path pauseConsumer = dir.resolve("pause-consumer");
        Path drivers = dir.resolve("drivers");

        try (DriverRun.Running consumer = Ha.start(Versions.JAVA_49, "JSON", namesrv.address(), drivers, "consumer",
                 "consumeLive:" + TOPIC + ":" + GROUP + ":" + stopConsumer + ":300:" + pauseConsumer);
             DriverRun.Running producer = Ha.start(Versions.JAVA_5, "ROCKETMQ", namesrv.address(), drivers, "producer",
                 "warm:" + TOPIC + ":60", "produce:" + TOPIC + ":f:1000000:4:5:" + stopProducer + ":false")) {
            java.util.function.Supplier<String> all = () -> diagnostics() + "\n" + producer.describe(20) + "\n" + consumer.describe(20);
            Await.until("the consumer consuming", FOLLOW, () -> consumer.lines("GOT ").size() >= 300, all);
            // It stops consuming for a while (and caches at most 16 messages a queue): a backlog builds on the broker.
            Files.createFile(pauseConsumer);
            Await.until("1,500 SEND_OK under load", FOLLOW, () -> producer.lines("OK ").size() >= 1500, all);

            master.kill();
            long killedAt = System.nanoTime();
            int deliveredAtKill = consumer.lines("GOT ").size();
            Files.delete(pauseConsumer);
            Await.until("the producer seeing its sends fail", FOLLOW, () -> producer.lines("FAIL ").size() >= 20, all);
            Await.until("the route without the master", FOLLOW, () -> masterRouted(false), all);
            Set<String> okBeforeRestart = keys(producer.lines("OK "));
            // Nothing can be SEND_OK while the master is dead; every one of those must come from the slave.
            Await.until("the consumer getting all " + okBeforeRestart.size() + " SEND_OK messages from the slave", FOLLOW,
                () -> missing(okBeforeRestart, keys(consumer.lines("GOT "))).isEmpty(), all);
            // The consumer commits to the slave now. It may have read a message or two from the master that the
            // master stored but had not replicated when it died (a master serves what it holds, in Java too), so a
            // committed offset can be past the slave's queue end.
            Map<Integer, Long> slaveEnds = Ha.queueEnds(slave, TOPIC, QUEUES);
            Map<Integer, Long> committed = Await.until("the consumer committing its offsets to the slave, at least " + slaveEnds,
                FOLLOW, () -> {
                    Map<Integer, Long> c = new TreeMap<>();
                    for (int q = 0; q < QUEUES; q++) {
                        c.put(q, slave.probe().committedOffset(GROUP, TOPIC, q));
                    }
                    return c;
                }, c -> slaveEnds.keySet().stream().allMatch(q -> c.get(q) >= slaveEnds.get(q)), all);
            assertEquals(okBeforeRestart.size(), keys(producer.lines("OK ")).size(), "SEND_OK while the master was dead");
            int deliveredBeforeRestart = consumer.lines("GOT ").size();
            // Messages cached in the client when the master died are at most 16 (and a batch) per queue; the rest
            // of the backlog came from the slave.
            assertTrue(deliveredBeforeRestart - deliveredAtKill > 500, "deliveries while the master was down: "
                + (deliveredBeforeRestart - deliveredAtKill) + " (at the kill " + deliveredAtKill + ")");
            System.out.println("failover: master down " + (System.nanoTime() - killedAt) / 1_000_000 + " ms; " + okBeforeRestart.size()
                + " SEND_OK before the kill, all consumed, " + (deliveredBeforeRestart - deliveredAtKill)
                + " of them from the slave; queue ends on the slave " + slaveEnds
                + ", committed there " + committed);

            master.restart();
            Await.until("the route with the master again", FOLLOW, () -> masterRouted(true), all);
            int okAtRestart = producer.lines("OK ").size();
            Await.until("500 SEND_OK after the restart", FOLLOW, () -> producer.lines("OK ").size() >= okAtRestart + 500, all);
            Files.createFile(stopProducer);
            DriverRun produced = producer.await(FOLLOW);
            produced.assertOk("warm");
            Ha.assertProduced(produced);
            Set<String> ok = keys(produced.lines("OK "));
            Await.until("the consumer getting all " + ok.size() + " SEND_OK messages", FOLLOW,
                () -> missing(ok, keys(consumer.lines("GOT "))).isEmpty(), all);
            Files.createFile(stopConsumer);
            DriverRun consumed = consumer.await(FOLLOW);
            consumed.assertOk("consumeLive");

            List<String[]> got = consumed.lines("GOT ");
            List<String> replayed = new ArrayList<>();
            for (String[] w : got.subList(deliveredBeforeRestart, got.size())) {
                int q = Integer.parseInt(w[1]);
                long offset = Long.parseLong(w[2]);
                if (offset < committed.get(q)) {
                    replayed.add(w[0] + "@" + q + ":" + offset);
                }
            }
            assertTrue(replayed.isEmpty(), "after the master came back the consumer went back below the offsets it had committed "
                + committed + ": " + replayed.subList(0, Math.min(10, replayed.size())));
            // One consumer, no rebalance: nothing sends it back, so nothing arrives twice (Java 4.9.7 too).
            assertEquals(keys(got).size(), got.size(), "messages delivered twice");
            Map<String, Integer> statuses = new TreeMap<>();
            produced.lines("NOTOK ").forEach(w -> statuses.merge(w[1], 1, Integer::sum));
            System.out.println("failover: " + ok.size() + " SEND_OK in all, " + produced.lines("FAIL ").size()
                + " sends failed while the master was down, other statuses " + statuses + "; " + got.size() + " deliveries of "
                + keys(got).size() + " messages, " + (got.size() - deliveredBeforeRestart) + " after the restart");
        }

        // The slave followed the restarted master; their logs are still one.
        long end = Ha.awaitCaughtUp(master, slave, this::diagnostics);
        Map<Integer, Long> ends = Ha.queueEnds(master, TOPIC, QUEUES);
        assertEquals(ends, Ha.queueEnds(slave, TOPIC, QUEUES), "queue ends of " + TOPIC + ": master, then slave");
        slave.stop();
        master.stop();
        Ha.assertReplica(master, slave, end, TOPIC, ends);
    }
}
