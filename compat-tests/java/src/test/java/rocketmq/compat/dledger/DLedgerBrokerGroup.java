package rocketmq.compat.dledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.rocketmq.common.protocol.body.ClusterInfo;
import org.apache.rocketmq.common.protocol.route.BrokerData;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.ChildProcess;
import rocketmq.compat.harness.FreePorts;
import rocketmq.compat.ha.HaNode;
import rocketmq.compat.ha.StoreFiles;
import rocketmq.compat.namesrv.NamesrvProbe;

/**
 * Three brokers in one DLedger group (one brokerName, DLedger group {@code <brokerName>-dl}, members n0..n2 on
 * consecutive free ports), ours or Java's in each slot, registered with one name server. Who leads is read from
 * the name server (the broker registered as brokerId 0); the leadership moves by LEADERSHIP_TRANSFER sent to the
 * leader's DLedger port, through the Java {@code DLedgerClient} (compat-tests/dledger-node) or our
 * {@code dledger leadershipTransfer}. The stores are compared file by file once all three stopped.
 */
final class DLedgerBrokerGroup implements AutoCloseable {
    /** A new master in the route after the old one went: Java's election (3 missed 2 s heartbeats) plus a registration. */
    static final Duration ELECTION = Duration.ofSeconds(30);
    /** Start-up, registration, metadata copies (a Java slave copies its master's every 10 s, the first 10 s after it follows). */
    static final Duration REGISTER = Duration.ofSeconds(60);
    static final Duration CATCH_UP = Duration.ofSeconds(60);
    private static final Duration TRANSFER = Duration.ofSeconds(60);
    private static final Pattern OUR_TRANSFER = Pattern.compile("LeadershipTransfer code=(-?\\d+)");
    private static final int MAGIC_V1 = 0xDAA320A7;
    private static final int MAGIC_V2 = 0xDAA320AB;

    final String brokerName;
    final String dledgerGroup;
    final String peers;
    private final Path dir;
    private final String namesrv;
    private final NamesrvProbe probe;
    private final String cluster;
    private final List<String> kinds;
    private final int basePort;
    private final Map<String, String> extra;
    private final List<DLedgerBroker> brokers = new ArrayList<>();
    private final List<String> transfers = new ArrayList<>();
    private int clientRuns;

    DLedgerBrokerGroup(Path dir, String namesrv, NamesrvProbe probe, String cluster, String brokerName, List<String> kinds,
                       Map<String, String> extra) {
        this.dir = dir;
        this.namesrv = namesrv;
        this.probe = probe;
        this.cluster = cluster;
        this.brokerName = brokerName;
        this.dledgerGroup = brokerName + "-dl";
        this.kinds = kinds;
        this.extra = extra;
        this.basePort = FreePorts.block(kinds.size());
        List<String> entries = new ArrayList<>();
        for (int i = 0; i < kinds.size(); i++) {
            entries.add("n" + i + "-127.0.0.1:" + (basePort + i));
        }
        this.peers = String.join(";", entries);
    }

    List<DLedgerBroker> brokers() {
        return brokers;
    }

    DLedgerBroker broker(int i) {
        return brokers.get(i);
    }

    /**
     * Starts every broker that is not running (those never started are created: n0, n1, ... in order), all at once;
     * returns once each listens.
     */
    void startAll() {
        List<Runnable> restarts = new ArrayList<>();
        for (DLedgerBroker b : brokers) {
            if (!b.isAlive()) {
                restarts.add(b::restart);
            }
        }
        parallel(restarts);
        startFirst(kinds.size());
    }

    /** Creates and starts the brokers up to n{@code count - 1} that were never started, all at once. */
    void startFirst(int count) {
        int from = brokers.size();
        if (from >= count) {
            return;
        }
        DLedgerBroker[] started = new DLedgerBroker[count - from];
        List<Runnable> starts = new ArrayList<>();
        for (int i = from; i < count; i++) {
            int n = i;
            starts.add(() -> started[n - from] = DLedgerBroker.start(kinds.get(n), dir.resolve("n" + n), namesrv, cluster,
                brokerName, dledgerGroup, peers, "n" + n, basePort + n, extra));
        }
        try {
            parallel(starts);
        } finally {
            boolean all = java.util.Arrays.stream(started).allMatch(java.util.Objects::nonNull);
            for (DLedgerBroker b : started) {
                if (all) {
                    brokers.add(b);
                } else if (b != null) {
                    b.close(); // a start failed: the others go too
                }
            }
        }
        assertEquals(count, brokers.size(), "brokers started");
    }

    /** SIGTERM to all, at once; waits for each to exit (ours must exit 0). */
    void stopAll() {
        List<Runnable> stops = new ArrayList<>();
        for (DLedgerBroker b : brokers) {
            if (b.isAlive()) {
                stops.add(b::stop);
            }
        }
        parallel(stops);
    }

    /** SIGKILL to all. */
    void killAll() {
        for (DLedgerBroker b : brokers) {
            if (b.isAlive()) {
                b.kill();
            }
        }
    }

    /** Runs the tasks on threads of their own and waits for all; rethrows the first failure. */
    static void parallel(List<Runnable> tasks) {
        List<Thread> threads = new ArrayList<>();
        Throwable[] failure = new Throwable[1];
        for (Runnable task : tasks) {
            Thread t = new Thread(() -> {
                try {
                    task.run();
                } catch (Throwable e) {
                    synchronized (failure) {
                        if (failure[0] == null) {
                            failure[0] = e;
                        }
                    }
                }
            });
            t.start();
            threads.add(t);
        }
        for (Thread t : threads) {
            try {
                t.join();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted", e);
            }
        }
        if (failure[0] instanceof RuntimeException r) {
            throw r;
        }
        if (failure[0] instanceof Error e) {
            throw e;
        }
        if (failure[0] != null) {
            throw new AssertionError(failure[0]);
        }
    }

    // ---- the name server's view ----

    /** brokerId to address of the group in GET_BROKER_CLUSTER_INFO (empty if it is not registered). */
    Map<Long, String> registered() throws Exception {
        ClusterInfo info = probe.clusterInfo();
        if (info.getBrokerAddrTable() == null || !info.getBrokerAddrTable().containsKey(brokerName)) {
            return Map.of();
        }
        return new TreeMap<>(info.getBrokerAddrTable().get(brokerName).getBrokerAddrs());
    }

    DLedgerBroker byAddress(String address) {
        for (DLedgerBroker b : brokers) {
            if (b.address().equals(address)) {
                return b;
            }
        }
        return null;
    }

    /** The broker registered as brokerId 0, or null. */
    DLedgerBroker master() throws Exception {
        String address = registered().get(0L);
        return address == null ? null : byAddress(address);
    }

    /**
     * Waits until a running broker is registered as brokerId 0 and every other running one as a slave with brokerId
     * {@code int(selfId.substring(1)) + 1} (Java's ids), and returns the master.
     */
    DLedgerBroker awaitGroup() {
        Map<Long, String> ids = Await.until(brokerName + ": one master (brokerId 0) and every running follower registered with its id",
            REGISTER, this::registered, this::groupRegistered, this::describe);
        return byAddress(ids.get(0L));
    }

    private boolean groupRegistered(Map<Long, String> ids) {
        DLedgerBroker master = ids.containsKey(0L) ? byAddress(ids.get(0L)) : null;
        if (master == null || !master.isAlive()) {
            return false;
        }
        for (DLedgerBroker b : brokers) {
            if (b != master && b.isAlive() && !b.address().equals(ids.get(b.slaveBrokerId()))) {
                return false;
            }
        }
        return true;
    }

    /** Waits until a running broker other than {@code old} is registered as brokerId 0, and returns it. */
    DLedgerBroker awaitNewMaster(DLedgerBroker old, Duration timeout) {
        return Await.until("a master (brokerId 0) other than " + old, timeout, this::master,
            m -> m != null && m != old && m.isAlive(), this::describe);
    }

    /** The brokers of {@code topic}'s route: exactly one, this group's. */
    TopicRouteData assertOneBrokerNameRouted(String topic) throws Exception {
        TopicRouteData route = probe.route(topic);
        List<String> names = route.getBrokerDatas().stream().map(BrokerData::getBrokerName).distinct().toList();
        assertEquals(List.of(brokerName), names, "broker names in the route of " + topic + ": " + route);
        return route;
    }

    // ---- metadata ----

    /**
     * Creates {@code topic} on the master (and on the slaves that accept it: a 5.x slave does, a 4.9 slave copies it
     * from its master) and waits until every running broker knows it and the name server routes it.
     */
    void createTopic(String topic, int queues) throws Exception {
        DLedgerBroker master = awaitGroup();
        master.probe().createTopic(topic, queues);
        for (DLedgerBroker b : brokers) {
            if (b != master && b.isAlive()) {
                try {
                    b.probe().createTopic(topic, queues);
                } catch (Exception e) {
                    System.out.println(b.label() + " refused topic " + topic + " (copies it from its master): " + e.getMessage());
                }
            }
        }
        for (DLedgerBroker b : brokers) {
            if (b.isAlive()) {
                Await.until(b.label() + " knowing topic " + topic, REGISTER, () -> b.probe().hasTopic(topic), this::describe);
            }
        }
        Await.until("the route of " + topic, REGISTER, () -> probe.route(topic).getQueueDatas().stream()
            .anyMatch(q -> q.getBrokerName().equals(brokerName) && q.getWriteQueueNums() == queues), this::describe);
    }

    // ---- leadership ----

    /**
     * Moves the leadership to {@code target}: LEADERSHIP_TRANSFER to the master's DLedger member with the term of its
     * {@code currterm}, through the Java client or ours, until {@code target} is registered as brokerId 0 (a refused
     * transfer, or one an election raced, is sent again). Returns the number of transfers sent.
     */
    int transferTo(DLedgerBroker target, boolean javaClient) {
        long deadline = System.nanoTime() + TRANSFER.toNanos();
        List<String> tries = new ArrayList<>();
        while (true) {
            DLedgerBroker master;
            try {
                master = master();
            } catch (Exception e) {
                master = null;
            }
            if (master == target) {
                return tries.size();
            }
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("leadership never moved to " + target + "; transfers: " + tries + "\n" + describe());
            }
            if (master == null || !master.isAlive()) {
                sleep(300);
                continue;
            }
            long term = master.currentTerm();
            int code = javaClient ? javaTransfer(master.selfId(), target.selfId(), term)
                : ourTransfer(master.selfId(), target.selfId(), term);
            String what = (javaClient ? "Java " : "ours ") + master.selfId() + "@" + term + "->" + target.selfId() + ":" + code;
            tries.add(what);
            transfers.add(what);
            if (code == 200) {
                DLedgerBroker from = master;
                // The old master steps down and re-registers as a slave; the new one registers as brokerId 0 once it
                // applied what it holds.
                try {
                    Await.until(target + " registered as brokerId 0 after the transfer from " + from, ELECTION,
                        () -> master() == target, this::describe);
                } catch (AssertionError e) {
                    if (System.nanoTime() - deadline > 0) {
                        throw e;
                    }
                }
            } else {
                sleep(500);
            }
        }
    }

    private ChildProcess client(String what, List<String> cmd, java.util.function.Consumer<ChildProcess.Builder> env) {
        clientRuns++;
        ChildProcess.Builder b = ChildProcess.builder(what + " (run " + clientRuns + ")")
            .command(cmd)
            .directory(dir)
            .output(dir.resolve("client-" + clientRuns + ".out"), dir.resolve("client-" + clientRuns + ".err"));
        env.accept(b);
        return b.start();
    }

    private String finish(ChildProcess run) {
        try {
            int code = run.awaitExit(Duration.ofSeconds(60));
            return code == 0 ? run.stdout() : null;
        } finally {
            run.close();
        }
    }

    /** One LEADERSHIP_TRANSFER through the Java DLedgerClient; the answer's code (-1 if the run failed). */
    int javaTransfer(String leader, String transferee, long term) {
        String out = finish(client("Java DLedgerClient transfer", List.of("bash", DLedgerMember.javaRunScript().toString(),
            "transfer", "-g", dledgerGroup, "-p", peers, "--leader", leader, "--to", transferee, "--term", Long.toString(term)),
            b -> b.env("JAVA_OPTS", "-Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1")));
        if (out != null) {
            for (String line : out.split("\n")) {
                if (line.startsWith("TRANSFER ")) {
                    return Integer.parseInt(line.split(" ")[1]);
                }
            }
        }
        return -1;
    }

    /** One LEADERSHIP_TRANSFER through our {@code dledger leadershipTransfer}; the answer's code (-1 if it failed). */
    int ourTransfer(String leader, String transferee, long term) {
        String out = finish(client("our dledger leadershipTransfer", List.of(DLedgerMember.ourBinary().toString(),
            "leadershipTransfer", "-g", dledgerGroup, "-p", peers, "-l", leader, "-t", transferee, "--term", Long.toString(term)),
            b -> b.env("RUST_LOG", "warn")));
        Matcher m = out == null ? null : OUR_TRANSFER.matcher(out);
        return m != null && m.find() ? Integer.parseInt(m.group(1)) : -1;
    }

    List<String> transfers() {
        return transfers;
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted", e);
        }
    }

    // ---- catching up ----

    /**
     * Waits until every running broker reports the same non-zero {@code commitLogMaxOffset} (in DLedger mode: the
     * committed end) and nothing left to dispatch; returns that offset.
     */
    long awaitCaughtUp() {
        List<DLedgerBroker> running = brokers.stream().filter(DLedgerBroker::isAlive).toList();
        long[] ends = Await.until("every broker of " + brokerName + " holding and dispatching the same committed log",
            CATCH_UP, () -> {
                long[] e = new long[running.size() * 2];
                for (int i = 0; i < running.size(); i++) {
                    e[2 * i] = running.get(i).probe().commitLogMaxOffset();
                    e[2 * i + 1] = running.get(i).probe().dispatchBehindBytes();
                }
                return e;
            }, e -> {
                for (int i = 0; i < e.length; i += 2) {
                    if (e[i] <= 0 || e[i] != e[0] || e[i + 1] != 0) {
                        return false;
                    }
                }
                return true;
            }, this::describe);
        return ends[0];
    }

    /** Queue id to queue end (GET_MAX_OFFSET) on {@code b}. */
    static Map<Integer, Long> queueEnds(DLedgerBroker b, String topic, int queues) throws Exception {
        Map<Integer, Long> ends = new TreeMap<>();
        for (int q = 0; q < queues; q++) {
            ends.put(q, b.probe().maxOffset(topic, q));
        }
        return ends;
    }

    /** Waits until every running broker has the same queue ends of {@code topic}; returns them. */
    Map<Integer, Long> awaitSameQueueEnds(String topic, int queues) {
        return Await.until("the same queue ends of " + topic + " on every broker", CATCH_UP, () -> {
            Map<String, Map<Integer, Long>> all = new LinkedHashMap<>();
            for (DLedgerBroker b : brokers) {
                if (b.isAlive()) {
                    all.put(b.label(), queueEnds(b, topic, queues));
                }
            }
            return all;
        }, all -> all.values().stream().distinct().count() == 1, this::describe).values().iterator().next();
    }

    // ---- the stores ----

    /**
     * With every broker stopped: the DLedger data and index files of the three are byte-identical up to the common
     * end (the smallest checkpoint endIndex, which must hold the entry of every consume-queue unit), the consume
     * queues of {@code topic} are byte-identical over {@code ends} units per queue, and each unit of each broker
     * points at a message of its own committed DLedger log: an entry (header pos, size, index) whose body is a
     * message of {@code topic} with that queue id, queue offset, size and physical offset. Returns a summary.
     */
    String assertStores(String topic, Map<Integer, Long> ends, int minDataSegments) {
        Map<String, Map<String, Long>> checkpoints = new LinkedHashMap<>();
        long end = Long.MAX_VALUE;
        for (DLedgerBroker b : brokers) {
            assertTrue(!b.isAlive(), b + " must be stopped before its files are compared");
            Map<String, Long> cp = DLedgerFiles.checkpoint(b.nodeDir());
            checkpoints.put(b.label(), cp);
            end = Math.min(end, cp.get("endIndex"));
        }
        assertTrue(end >= 0, "every broker's DLedger log holds entries: checkpoints " + checkpoints);
        DLedgerBroker first = brokers.get(0);
        long dataEnd = DLedgerFiles.dataEnd(first.nodeDir(), end);
        long indexEnd = (end + 1) * DLedgerFiles.INDEX_UNIT;
        int dataSegments = DLedgerFiles.segments(first.nodeDir().resolve("data")).headMap(dataEnd).size();
        assertTrue(dataSegments >= minDataSegments, "the DLedger log crosses at least " + minDataSegments
            + " data segments: data end " + dataEnd + " in " + dataSegments + " segments");
        for (DLedgerBroker b : brokers.subList(1, brokers.size())) {
            DLedgerFiles.assertSameBytes(first.nodeDir(), first.label(), b.nodeDir(), b.label(), "index", indexEnd);
            DLedgerFiles.assertSameBytes(first.nodeDir(), first.label(), b.nodeDir(), b.label(), "data", dataEnd);
            StoreFiles.assertSameConsumeQueues(first.storeDir(), b.storeDir(), topic, ends, b.label() + " against " + first.label());
        }
        long units = 0;
        for (DLedgerBroker b : brokers) {
            units = assertConsumeQueuesPointIntoTheLog(b, topic, ends, end, dataEnd);
        }
        return brokerName + ": DLedger entries 0.." + end + " identical on all three (data [0, " + dataEnd + ") in "
            + dataSegments + " segments, index [0, " + indexEnd + ")), checkpoints " + checkpoints + "; consume queues of "
            + topic + " identical " + ends + ", each of the " + units + " units on each broker a message of the common log";
    }

    private static long assertConsumeQueuesPointIntoTheLog(DLedgerBroker b, String topic, Map<Integer, Long> ends,
                                                           long lastIndex, long dataEnd) {
        byte[] data = DLedgerFiles.read(b.nodeDir().resolve("data"), 0, dataEnd);
        ByteBuffer log = ByteBuffer.wrap(data);
        long units = 0;
        for (Map.Entry<Integer, Long> q : ends.entrySet()) {
            int queueId = q.getKey();
            Path cqDir = b.storeDir().resolve("consumequeue").resolve(topic).resolve(Integer.toString(queueId));
            ByteBuffer cq = ByteBuffer.wrap(StoreFiles.read(cqDir, 0, q.getValue() * StoreFiles.CQ_UNIT));
            for (long i = 0; i < q.getValue(); i++) {
                units++;
                int at = Math.toIntExact(i * StoreFiles.CQ_UNIT);
                long phy = cq.getLong(at);
                int size = cq.getInt(at + 8);
                String where = b.label() + ": consume queue " + topic + "/" + queueId + " unit " + i + " (offset " + phy
                    + ", size " + size + ")";
                assertTrue(phy >= DLedgerFiles.ENTRY_HEADER && size > 0 && phy + size <= dataEnd,
                    where + " is not inside the common DLedger log [0, " + dataEnd + ")");
                int entry = Math.toIntExact(phy - DLedgerFiles.ENTRY_HEADER);
                assertEquals(size + DLedgerFiles.ENTRY_HEADER, log.getInt(entry + 4), where + ": size of its DLedger entry");
                assertTrue(log.getLong(entry + 8) <= lastIndex, where + ": DLedger index " + log.getLong(entry + 8)
                    + " past the common end " + lastIndex);
                assertEquals(entry, log.getLong(entry + 24), where + ": pos in its DLedger entry header");
                int m = Math.toIntExact(phy);
                assertEquals(size, log.getInt(m), where + ": the message's total size");
                int magic = log.getInt(m + 4);
                assertTrue(magic == MAGIC_V1 || magic == MAGIC_V2, where + ": message magic " + Integer.toHexString(magic));
                assertEquals(queueId, log.getInt(m + 12), where + ": the message's queue id");
                assertEquals(i, log.getLong(m + 20), where + ": the message's queue offset");
                assertEquals(phy, log.getLong(m + 28), where + ": the message's physical offset");
                assertEquals(topic, topicOf(log, m, magic), where + ": the message's topic");
            }
        }
        return units;
    }

    /** The topic of the message at {@code m} (commit-log format v1 or v2). */
    private static String topicOf(ByteBuffer log, int m, int magic) {
        int sysFlag = log.getInt(m + 36);
        int bornHost = (sysFlag & 0x10) == 0 ? 8 : 20;
        int storeHost = (sysFlag & 0x20) == 0 ? 8 : 20;
        int at = m + 48 + bornHost + 8 + storeHost + 4 + 8;
        int bodyLength = log.getInt(at);
        at += 4 + bodyLength;
        int topicLength = magic == MAGIC_V2 ? log.getShort(at) & 0xFFFF : log.get(at) & 0xFF;
        at += magic == MAGIC_V2 ? 2 : 1;
        return new String(log.array(), at, topicLength, StandardCharsets.UTF_8);
    }

    String describe() {
        StringBuilder sb = new StringBuilder("DLedger broker group " + brokerName + " (" + peers + ")");
        try {
            sb.append(", registered ").append(registered());
        } catch (Exception e) {
            sb.append(", cluster info: ").append(e);
        }
        sb.append(", transfers ").append(transfers).append('\n');
        for (DLedgerBroker b : brokers) {
            sb.append(b.describe(40)).append('\n');
            sb.append(javaThreads(b));
        }
        return sb.toString();
    }

    /**
     * For a running Java broker: the stacks of its DLedger role-change thread and the master-only services it stops
     * and starts (what a role change that does not finish waits for), from jstack.
     */
    private static String javaThreads(DLedgerBroker b) {
        long pid = b.node().javaPid();
        if (pid < 0) {
            return "";
        }
        try {
            Process p = new ProcessBuilder(Path.of(System.getProperty("java.home"), "bin", "jstack").toString(), Long.toString(pid))
                .redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes(), StandardCharsets.UTF_8);
            p.waitFor();
            StringBuilder sb = new StringBuilder();
            for (String thread : out.split("\n\n")) {
                if (thread.startsWith("\"DLegerRoleChangeHandler") || thread.startsWith("\"TransactionalMessageCheckService")) {
                    sb.append(thread).append('\n');
                }
            }
            return sb.length() == 0 ? "" : "-- jstack of " + b.label() + " (role change, transaction check) --\n" + sb;
        } catch (Exception e) {
            return "(jstack of " + b.label() + ": " + e + ")\n";
        }
    }

    /** For ours: forwards listenPort - 2 to listenPort unless something listens there (see {@link HaNode#standInForTheFastPort}). */
    void standInForOurFastPorts() {
        for (DLedgerBroker b : brokers) {
            if (b.ours()) {
                b.node().standInForTheFastPort();
            }
        }
    }

    @Override
    public void close() {
        for (DLedgerBroker b : brokers) {
            try {
                b.close();
            } catch (RuntimeException e) {
                System.out.println("closing " + b + ": " + e);
            }
        }
    }
}
