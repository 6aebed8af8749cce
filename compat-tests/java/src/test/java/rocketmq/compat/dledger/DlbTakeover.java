package rocketmq.compat.dledger;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import rocketmq.compat.client.DriverRun;
import rocketmq.compat.dledger.DlbTraffic.Round;
import rocketmq.compat.harness.Await;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * One broker folder in DLedger mode (single-member group n0) handed from one implementation to another: each
 * {@link #phase} starts a kind on the same store, conf and ports, checks that it serves everything the previous
 * ones stored (every message pulled from offset 0 unchanged, found by key, the group's committed offsets), runs a
 * round of traffic, and ends by a clean stop or a SIGKILL; the DLedger data then holds exactly the messages served.
 */
final class DlbTakeover implements AutoCloseable {
    static final String TOPIC_A = "DlbTkA";
    static final String TOPIC_B = "DlbTkB";
    static final String G1 = "dlb_tk_g1";

    enum End { STOP, KILL }

    private final NameServer namesrv;
    private final NamesrvProbe nsProbe;
    final DlbTraffic traffic;
    final DlbNode node;
    final DlbLog log = new DlbLog(DlbTraffic.counts(TOPIC_A, 4, TOPIC_B, 2));
    private Map<Integer, Long> committed;
    private int phases;
    /** The highest commit-log offset stored before the last SIGKILL (-1: none yet): see {@link DlbChecks#assertQueries}. */
    private long crashHorizon = -1;
    private End lastEnd;

    DlbTakeover(Path dir, String cluster, String brokerName, Map<String, String> extra) {
        namesrv = NameServer.start(dir.resolve("namesrv"));
        nsProbe = NamesrvProbe.connect(namesrv.address());
        traffic = new DlbTraffic(namesrv.address(), dir.resolve("drivers"));
        node = DlbNode.create(dir.resolve("node"), namesrv.address(), cluster, brokerName, brokerName + "-group", extra);
    }

    String diagnostics() {
        return node.describe(80) + "\n" + namesrv.describe(20);
    }

    /**
     * The first phase: a Java broker of {@code version} in DLedger mode on an empty store, topics A (4 queues) and B
     * (2); 2,000 messages to A that G1 consumes, 600 more to A and 1,000 to B; then G1's offsets are on disk
     * (config/consumerOffset.json) and the broker stops or is killed.
     */
    void javaWrites(String version, End end) throws Exception {
        long t = System.nanoTime();
        String what = "phase 1 (" + DlbNode.label(version) + ", empty store)";
        node.start(version);
        node.awaitMaster(nsProbe, this::diagnostics);
        node.probe().createTopic(TOPIC_A, 4);
        node.probe().createTopic(TOPIC_B, 2);
        DriverRun run = traffic.run(Versions.JAVA_49, "JSON", "java-writes", "warm:DlbWarm:60", DlbTraffic.produce(TOPIC_A, "a", 2000),
            "consume:" + TOPIC_A + ":" + G1 + ":a:2000:90", DlbTraffic.produce(TOPIC_A, "c", 600),
            DlbTraffic.produce(TOPIC_B, "b", 1000));
        DlbTraffic.assertAllOk(run, this::diagnostics, "warm", "produce", "consume", "produce#2", "produce#3");
        List<String[]> ok = run.lines("OK ").stream().filter(w -> !w[0].startsWith("warm-")).toList();
        log.advance(node.client(), ok, Map.of("a", TOPIC_A, "c", TOPIC_A, "b", TOPIC_B), 0, what);
        Map<Integer, Long> aEnds = DlbChecks.countsOf(log, TOPIC_A, "a");
        committed = Await.until(G1 + " committing " + aEnds, DlbNode.REGISTER,
            () -> DlbChecks.committed(node, G1, TOPIC_A, 4), aEnds::equals, this::diagnostics);
        if (end == End.KILL) {
            // A broker flushes consumer offsets every 5 s: wait for them on disk, so that the kill does not lose them.
            Await.until(G1 + "'s offsets " + aEnds + " in " + consumerOffsetFile(), DlbNode.REGISTER,
                () -> aEnds.equals(persistedOffsets(consumerOffsetFile(), TOPIC_A, G1)), this::diagnostics);
        }
        end(end, what);
        System.out.printf("%s: done in %d ms%n", what, (System.nanoTime() - t) / 1_000_000);
    }

    /**
     * A later phase: {@code kind} starts on the store; it must register as master, keep G1's committed offsets,
     * serve every message stored before unchanged (pulled from 0, found by key), then take {@code round}; it ends
     * with {@code end}. The DLedger data then holds exactly the messages served, in one log from pos 0.
     */
    void phase(String kind, Round round, End end) throws Exception {
        long t = System.nanoTime();
        phases++;
        String what = "phase " + (phases + 1) + " (" + DlbNode.label(kind) + ")";
        node.start(kind);
        node.awaitMaster(nsProbe, this::diagnostics);
        assertEquals(0, DlbStore.firstDataSegment(node.dataDir()), what + ": the first DLedger data segment");
        assertEquals(committed, DlbChecks.committed(node, G1, TOPIC_A, 4), what + ": " + G1 + "'s committed offsets");
        if (lastEnd == End.KILL) {
            // After a crash Java 5.3.3 registers as master while its consume queues still miss messages for a moment
            // (its recovery truncates them below the real end: it counts records without their 48-byte entry headers,
            // and its dispatch puts them back shortly after), so that is waited for here; after a clean stop not.
            long t0 = System.nanoTime();
            String[] first = new String[1];
            Await.until(what + ": every message stored before the crash served", DlbNode.REGISTER, () -> {
                try {
                    log.advance(node.client(), List.of(), Map.of(), 0, what + ", before any send");
                    return true;
                } catch (AssertionError e) {
                    if (first[0] == null) {
                        first[0] = e.getMessage();
                    }
                    throw new Exception(e.getMessage(), e);
                }
            }, this::diagnostics);
            System.out.printf("%s: everything served %d ms after it registered as master%s%n", what,
                (System.nanoTime() - t0) / 1_000_000, first[0] == null ? "" : " (at first: " + first[0] + ")");
        } else {
            log.advance(node.client(), List.of(), Map.of(), 0, what + ", before any send");
        }
        DlbChecks.assertQueries(node, log.all(), crashHorizon, what, this::diagnostics);
        long before = log.maxOffset();
        traffic.round(node, log, round, 0, this::diagnostics);
        DlbChecks.assertQueries(node, log.all().stream().filter(m -> m.commitLogOffset() > before).toList(),
            what + ", the new messages", this::diagnostics);
        committed = DlbChecks.committed(node, G1, TOPIC_A, 4);
        if (end == End.KILL) {
            // G1's offsets must survive the kill: the broker has them on disk before it dies.
            Map<Integer, Long> c = committed;
            Await.until(G1 + "'s offsets " + c + " in " + consumerOffsetFile(), DlbNode.REGISTER,
                () -> c.equals(persistedOffsets(consumerOffsetFile(), TOPIC_A, G1)), this::diagnostics);
        }
        end(end, what);
        System.out.printf("%s: done in %d ms%n", what, (System.nanoTime() - t) / 1_000_000);
    }

    private void end(End end, String what) {
        lastEnd = end;
        if (end == End.STOP) {
            node.stop();
        } else {
            node.kill();
            crashHorizon = log.maxOffset();
            System.out.printf("%s: killed (SIGKILL)%n", node.label());
        }
        DlbChecks.assertDLedgerHolds(node, log, 0, what + (end == End.STOP ? ", stopped" : ", killed"));
    }

    Path consumerOffsetFile() {
        return node.storeDir().resolve("config/consumerOffset.json");
    }

    /**
     * The offsets of {@code topic@group} in a broker's consumerOffset.json (fastjson, unquoted integer keys:
     * {@code "T@G":{0:12,1:7}}); empty if the file or the entry is not there.
     */
    static Map<Integer, Long> persistedOffsets(Path file, String topic, String group) {
        Map<Integer, Long> out = new TreeMap<>();
        String json;
        try {
            json = Files.exists(file) ? Files.readString(file) : "";
        } catch (IOException e) {
            return out;
        }
        Matcher entry = Pattern.compile("\"" + Pattern.quote(topic + "@" + group) + "\"\\s*:\\s*\\{([^}]*)}").matcher(json);
        if (entry.find()) {
            Matcher kv = Pattern.compile("\"?(\\d+)\"?\\s*:\\s*(\\d+)").matcher(entry.group(1));
            while (kv.find()) {
                out.put(Integer.parseInt(kv.group(1)), Long.parseLong(kv.group(2)));
            }
        }
        return out;
    }

    @Override
    public void close() {
        node.close();
        nsProbe.close();
        namesrv.close();
    }
}
