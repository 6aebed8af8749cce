package rocketmq.compat.dledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.CleanupMode;
import org.junit.jupiter.api.io.TempDir;
import rocketmq.compat.client.DriverRun;
import rocketmq.compat.dledger.DlbClient.Msg;
import rocketmq.compat.dledger.DlbTraffic.Round;
import rocketmq.compat.ha.StoreFiles;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * Turning DLedger on for a store written without it ("upgrade", Java's mixed mode), by ours and by Java 4.9.7 on two
 * copies of the same store. A Java 4.9.7 broker without DLedger (1 MiB commit-log segments) stores 6,000 messages
 * with keys in two topics (4 and 2 queues; about three segments), a group consumes the first 3,000 of one topic (so
 * it has committed offsets below the queue ends), and the broker stops cleanly. Its store is copied twice; ours
 * starts on copy A and Java 4.9.7 on copy B, each with DLedger on as the single member of its group (n0, which
 * elects itself) and the same broker name. For both:
 *
 * <ul>
 *   <li>the old commit log is recovered and closed: the old last segment gets a blank marker (remaining size,
 *       0xCBD43194) at the data end, every other byte of every old segment is unchanged, the pre-allocated empty
 *       segment is gone, and the first DLedger data segment is created at the end of the old last segment (the
 *       divided offset, its file name) -- the same offset for ours and Java's;
 *   <li>every old message is still pulled from offset 0 of its queue, unchanged (queue offset, commit-log offset,
 *       size, body), and found by its key (QUERY_MESSAGE, at its offset); the group's committed offsets are kept;
 *   <li>the group resumes at its committed offsets (push consumer: nothing below them, nothing twice, all after) and
 *       a fresh group reads the topic from its first offset, old and new messages; a fresh group reads all old
 *       messages of the other topic; new messages (all SEND_OK) are pulled at commit-log offsets at or past the
 *       divided offset, and after a stop they are exactly the DLedger data entries (record offset = entry pos + 48,
 *       index contiguous from 0, the first entry at the divided offset);
 *   <li>after a clean restart the same again: the divided offset stays, nothing is lost, more messages go to DLedger.
 * </ul>
 *
 * <p>{@code -Drmq.dledger.upgrade=4.9.7} runs copy A with Java 4.9.7 instead of ours (both copies Java): the
 * assertions describe what Java does, and were checked that way.
 */
@DisplayName("DLedger upgrade: a plain Java 4.9.7 store first started in DLedger mode, by ours and by Java 4.9.7")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class DLedgerUpgradeTest {
    private static final String CLUSTER = "DlbUpgradeCluster";
    private static final String BROKER = "dlb-upgrade";
    private static final String GROUP_NAME = "dlb-upgrade-group";
    private static final String TOPIC_A = "DlbUpA";
    private static final String TOPIC_B = "DlbUpB";
    private static final String G1 = "dlb_up_g1";
    private static final int SEG = DlbNode.SEGMENT;

    @TempDir(cleanup = CleanupMode.ON_SUCCESS)
    static Path dir;
    private final String oursKind = System.getProperty("rmq.dledger.upgrade", "ours");
    private NameServer namesrv;
    private NamesrvProbe nsProbe;
    private DlbTraffic traffic;
    private final List<DlbNode> nodes = new ArrayList<>();

    @BeforeAll
    void start() {
        namesrv = NameServer.start(dir.resolve("namesrv"));
        nsProbe = NamesrvProbe.connect(namesrv.address());
        traffic = new DlbTraffic(namesrv.address(), dir.resolve("drivers"));
    }

    @AfterAll
    void stop() {
        nodes.forEach(DlbNode::close);
        nsProbe.close();
        namesrv.close();
    }

    private String diagnostics() {
        StringBuilder sb = new StringBuilder();
        nodes.forEach(n -> sb.append(n.describe(60)).append('\n'));
        return sb + namesrv.describe(20);
    }

    /** What the plain store held when it stopped. */
    private record Plain(DlbNode node, DlbLog log, Map<Integer, Long> committed, long dataEnd, long divided) {
    }

    @Test
    void bothKeepEveryOldMessageAndSplitTheLogAtTheSameOffset() throws Exception {
        long t0 = System.nanoTime();
        Plain plain = writePlainStore();
        System.out.printf("upgrade: plain store written in %d ms%n", (System.nanoTime() - t0) / 1_000_000);

        Map<String, Long> divided = new LinkedHashMap<>();
        for (String kind : List.of(oursKind, Versions.JAVA_49)) {
            long t = System.nanoTime();
            String name = (DlbNode.isOurs(kind) ? "ours" : "java" + kind.replace(".", "")) + (divided.isEmpty() ? "-A" : "-B");
            DlbNode node = DlbNode.create(dir.resolve(name), namesrv.address(), CLUSTER, BROKER, GROUP_NAME, Map.of());
            nodes.add(node);
            DlbStore.copy(plain.node().storeDir(), node.storeDir());
            divided.put(name, upgrade(plain, node, kind, name));
            System.out.printf("upgrade: copy %s with %s done in %d ms%n", name, DlbNode.label(kind), (System.nanoTime() - t) / 1_000_000);
        }
        assertEquals(1, divided.values().stream().distinct().count(), "the divided offsets " + divided);
        // Both old commit logs are the plain one plus the same marker, so they are identical to each other too.
        List<Path> logs = nodes.stream().skip(1).map(DlbNode::commitLogDir).toList();
        assertEquals(DlbStore.segmentNames(logs.get(0)), DlbStore.segmentNames(logs.get(1)), "old segments of the two copies");
        StoreFiles.assertSameBytes(logs.get(0), logs.get(1), StoreFiles.firstSegment(logs.get(0)), plain.divided(),
            "the old commit log of copy B against copy A");
        System.out.printf("upgrade: divided offsets %s; %d ms in all%n", divided, (System.nanoTime() - t0) / 1_000_000);
    }

    /**
     * A Java 4.9.7 broker without DLedger: topics A (4 queues) and B (2), 3,000 messages to A that G1 consumes, then
     * 1,000 more to A and 2,000 to B; stopped cleanly.
     */
    private Plain writePlainStore() throws Exception {
        DlbNode plain = DlbNode.create(dir.resolve("plain"), namesrv.address(), CLUSTER, BROKER, null, Map.of());
        nodes.add(plain);
        plain.start(Versions.JAVA_49);
        plain.awaitMaster(nsProbe, this::diagnostics);
        plain.probe().createTopic(TOPIC_A, 4);
        plain.probe().createTopic(TOPIC_B, 2);
        DriverRun run = traffic.run(Versions.JAVA_49, "JSON", "plain", "warm:DlbWarm:60",
            DlbTraffic.produce(TOPIC_A, "a", 3000), "consume:" + TOPIC_A + ":" + G1 + ":a:3000:90",
            DlbTraffic.produce(TOPIC_A, "c", 1000), DlbTraffic.produce(TOPIC_B, "b", 2000));
        DlbTraffic.assertAllOk(run, this::diagnostics, "warm", "produce", "consume", "produce#2", "produce#3");
        List<String[]> ok = run.lines("OK ").stream().filter(w -> !w[0].startsWith("warm-")).toList();
        DlbLog log = new DlbLog(DlbTraffic.counts(TOPIC_A, 4, TOPIC_B, 2));
        log.advance(plain.client(), ok, Map.of("a", TOPIC_A, "c", TOPIC_A, "b", TOPIC_B), 0, "the plain store");

        // G1 consumed the 3,000 a-messages, which come before the c-messages in every queue.
        Map<Integer, Long> aEnds = DlbChecks.countsOf(log, TOPIC_A, "a");
        Map<Integer, Long> committed = Await.until(G1 + " committing " + aEnds, DlbNode.REGISTER,
            () -> DlbChecks.committed(plain, G1, TOPIC_A, 4), aEnds::equals, this::diagnostics);
        plain.stop();

        long dataEnd = StoreFiles.dataEnd(plain.commitLogDir());
        List<Long> segments = DlbStore.segmentNames(plain.commitLogDir());
        long lastData = dataEnd / SEG * SEG;
        assertTrue(dataEnd % SEG != 0, "the plain commit log ends exactly at a segment end (" + dataEnd + ")");
        assertTrue(lastData >= 2L * SEG, "the plain commit log has at least three segments of data: it ends at " + dataEnd);
        assertEquals(log.maxOffset() + log.all().stream().filter(m -> m.commitLogOffset() == log.maxOffset()).findFirst()
            .orElseThrow().storeSize(), dataEnd, "the data end found in the plain commit log, against the last message pulled");
        System.out.printf("upgrade: plain store: %d messages, commit-log segments %s, data end %d; %s committed %s%n",
            log.size(), segments, dataEnd, G1, committed);
        return new Plain(plain, log, committed, dataEnd, lastData + SEG);
    }

    /** Two starts with DLedger on the copy: the upgrade, then a clean restart. Returns the divided offset. */
    private long upgrade(Plain plain, DlbNode node, String kind, String name) throws Exception {
        DlbLog log = plain.log().copy();
        Map<Integer, Long> committed = plain.committed();
        long divided = -1;
        for (int start = 1; start <= 2; start++) {
            String what = name + " start " + start + " (" + DlbNode.label(kind) + ")";
            node.start(kind);
            node.awaitMaster(nsProbe, this::diagnostics);
            long first = DlbStore.firstDataSegment(node.dataDir());
            assertEquals(plain.divided(), first, what + ": the first DLedger data segment (" + node.dataDir()
                + ": " + DlbStore.segmentNames(node.dataDir()) + ") must start at the end of the old last segment, "
                + "the plain log ending at " + plain.dataEnd());
            divided = first;
            DlbStore.assertUpgradedOldLog(plain.node().commitLogDir(), node.commitLogDir(), plain.dataEnd(), divided, SEG, what);
            assertEquals(committed, DlbChecks.committed(node, G1, TOPIC_A, 4), what + ": " + G1 + "'s committed offsets");

            log.advance(node.client(), List.of(), Map.of(), divided, what + ", before any send");
            DlbChecks.assertQueries(node, log.all(), what, this::diagnostics);

            String tag = "u" + start + name.replace("-", "").replace("java", "j");
            // The upgrade start: G1 resumes and a fresh group reads topic A while new messages come; the restart:
            // more messages (G1's committed offsets, every message and the split were checked above).
            Round round = start == 1
                ? Round.withConsumers(tag, DlbTraffic.counts(TOPIC_A, 600, TOPIC_B, 300), Versions.JAVA_5, "ROCKETMQ",
                    List.of("consume:" + TOPIC_B + ":dlb_fresh_b_" + tag + ":b:2000:90"), TOPIC_A, G1, Versions.JAVA_49, "JSON")
                : Round.sendOnly(tag, DlbTraffic.counts(TOPIC_A, 300, TOPIC_B, 300), Versions.JAVA_49, "JSON", List.of());
            traffic.round(node, log, round, divided, this::diagnostics);
            long dividedAt = divided;
            DlbChecks.assertQueries(node, log.all().stream().filter(m -> m.commitLogOffset() >= dividedAt).toList(),
                what + ", the new messages", this::diagnostics);
            committed = DlbChecks.committed(node, G1, TOPIC_A, 4);
            node.stop();

            DlbStore.assertUpgradedOldLog(plain.node().commitLogDir(), node.commitLogDir(), plain.dataEnd(), divided, SEG,
                what + ", stopped");
            DlbChecks.assertDLedgerHolds(node, log, divided, what + ", stopped");
        }
        return divided;
    }
}
