package rocketmq.compat.dledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import java.util.stream.Stream;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.ChildProcess;
import rocketmq.compat.harness.FreePorts;

/**
 * A 3-member DLedger group of Java and our members, with the clients that drive it: the Java
 * {@code DLedgerClient} (compat-tests/dledger-node/DLedgerLoad.java, a JVM per run: DLedger 0.3.1.2 brings
 * rocketmq-remoting 4.9.4, this JVM has 4.9.7) and our {@code dledger append|get|leadershipTransfer}.
 *
 * <p>Every acknowledged append (code 200) is recorded as index → SHA-256 of its body: an index acknowledged
 * twice with different bodies, or read back with another body, is an acknowledged entry lost.
 */
final class DLedgerGroup implements AutoCloseable {
    /** Small segments so a few hundred entries cross several data and index files (32-byte index units). */
    static final int DATA_SEGMENT = 64 * 1024;
    static final int INDEX_SEGMENT = 8 * 1024;
    static final int INDEX_UNIT = 32;
    private static final Duration CLIENT_RUN = Duration.ofSeconds(210);
    private static final Duration TRANSFER = Duration.ofSeconds(40);
    private static final String CLIENT_JAVA_OPTS = "-Xmx128m -XX:+UseSerialGC -XX:TieredStopAtLevel=1";
    private static final Pattern OUR_APPEND = Pattern.compile("Append Result:(\\{.*})");
    private static final Pattern OUR_TRANSFER = Pattern.compile("LeadershipTransfer code=(-?\\d+)");

    /**
     * Short timeouts where DLedgerConfig has them (heartbeat every 250 ms, a leader lost after 4 missed ones,
     * 1 s); the force clean is off so a nearly full CI disk cannot delete segments under the comparison.
     * Both implementations take the same keys.
     */
    static final List<String> OPTIONS = List.of(
        "--heart-beat-time-interval-ms", "250",
        "--max-heart-beat-leak", "4",
        "--mapped-file-size-for-entry-data", Integer.toString(DATA_SEGMENT),
        "--mapped-file-size-for-entry-index", Integer.toString(INDEX_SEGMENT),
        "--enable-disk-force-clean", "false");

    final String group;
    final String peers;
    final List<DLedgerMember> members = new ArrayList<>();
    private final Path dir;
    /** index → SHA-256 of the body of every acknowledged append. */
    final TreeMap<Long, String> acked = new TreeMap<>();
    private long nextItem;
    private String compared = "(stores not compared)";
    /** Every leader an acknowledged append named, in order of first appearance. */
    private final Set<String> leadersSeen = new java.util.LinkedHashSet<>();
    private final List<String> transfers = new ArrayList<>();
    private int runs;

    /** The leader and term an acknowledged append named. */
    record Leader(String id, long term) {
    }

    DLedgerGroup(String group, Path dir, List<DLedgerMember.Kind> kinds) {
        this.group = group;
        this.dir = dir;
        int base = FreePorts.block(kinds.size());
        List<String> entries = new ArrayList<>();
        for (int i = 0; i < kinds.size(); i++) {
            entries.add("n" + i + "-127.0.0.1:" + (base + i));
        }
        this.peers = String.join(";", entries);
        for (int i = 0; i < kinds.size(); i++) {
            members.add(new DLedgerMember(group, "n" + i, base + i, peers, dir.resolve("n" + i), OPTIONS, kinds.get(i)));
        }
    }

    void startAll() {
        for (DLedgerMember m : members) {
            m.start(m.kind());
        }
    }

    DLedgerMember member(String id) {
        return members.stream().filter(m -> m.id().equals(id)).findFirst()
            .orElseThrow(() -> new AssertionError("no member " + id + " in " + peers));
    }

    String describe() {
        StringBuilder sb = new StringBuilder("group " + group + " (" + peers + ")\n");
        for (DLedgerMember m : members) {
            sb.append(m.describe(25)).append('\n');
        }
        return sb.toString();
    }

    // ---- bodies (as DLedgerLoad.body) ----

    static byte[] body(long item) {
        int len = 100 + (int) ((item * 7919) % 901);
        StringBuilder sb = new StringBuilder(len);
        sb.append("dledger-compat item=").append(item).append(' ');
        while (sb.length() < len) {
            sb.append((char) ('a' + (item + sb.length()) % 26));
        }
        sb.setLength(len);
        return sb.toString().getBytes(StandardCharsets.US_ASCII);
    }

    static String sha256(byte[] data) {
        try {
            StringBuilder sb = new StringBuilder(64);
            for (byte b : MessageDigest.getInstance("SHA-256").digest(data)) {
                sb.append(String.format("%02x", b));
            }
            return sb.toString();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private void ack(long index, String sha, String how) {
        String before = acked.putIfAbsent(index, sha);
        if (before != null && !before.equals(sha)) {
            throw new AssertionError("index " + index + " acknowledged twice with different bodies (" + how
                + "): an acknowledged entry was lost\n" + describe());
        }
    }

    // ---- the Java client ----

    /** Starts a DLedgerLoad run (append|get|transfer ...) in the background. */
    ChildProcess javaClient(String what, String... args) {
        runs++;
        List<String> cmd = new ArrayList<>(List.of("bash", DLedgerMember.javaRunScript().toString()));
        cmd.addAll(Arrays.asList(args));
        return ChildProcess.builder("Java DLedgerClient " + what + " (run " + runs + ")")
            .command(cmd)
            .directory(dir)
            .env("JAVA_OPTS", CLIENT_JAVA_OPTS)
            .output(dir.resolve("client-" + runs + "-" + what + ".out"), dir.resolve("client-" + runs + "-" + what + ".err"))
            .start();
    }

    private List<String> finish(ChildProcess run) {
        try {
            int code = run.awaitExit(CLIENT_RUN);
            if (code != 0) {
                throw new AssertionError(run.name() + " exited with " + code + "\n" + run.describe(30) + "\n" + describe());
            }
            return run.stdout().lines().toList();
        } finally {
            run.close();
        }
    }

    /** Starts {@code count} appends through the Java client (4 threads, each its own client) without waiting. */
    ChildProcess startJavaAppends(int count) {
        return startJavaAppends(count, 4);
    }

    /** As {@link #startJavaAppends(int)}, from {@code threads} threads of one Java client. */
    ChildProcess startJavaAppends(int count, int threads) {
        long from = nextItem;
        nextItem += count;
        return javaClient("append", "append", "-g", group, "-p", peers, "--from", Long.toString(from),
            "--count", Integer.toString(count), "--threads", Integer.toString(threads), "--deadline-seconds", "200");
    }

    /** Waits for a {@link #startJavaAppends} run; records its acknowledged appends; returns the leaders they named. */
    Set<String> finishJavaAppends(ChildProcess run) {
        Set<String> leaders = new HashSet<>();
        long ok = 0;
        for (String line : finish(run)) {
            String[] f = line.split(" ");
            if (f[0].equals("OK")) {
                // OK <item> <index> <term> <pos> <sha> <leaderId>
                assertEquals(sha256(body(Long.parseLong(f[1]))), f[5], "body hash of item " + f[1]);
                ack(Long.parseLong(f[2]), f[5], "Java client");
                leaders.add(f[6]);
                leadersSeen.add(f[6] + "@" + f[3]);
                ok++;
            } else if (f[0].equals("DONE")) {
                assertEquals(ok, Long.parseLong(f[1]), run.name() + ": acknowledged appends");
            }
        }
        return leaders;
    }

    Set<String> javaAppends(int count) {
        return finishJavaAppends(startJavaAppends(count));
    }

    /** One LEADERSHIP_TRANSFER through the Java client; the answer's code. */
    int javaTransfer(String leader, String transferee, long term) {
        for (String line : finish(javaClient("transfer", "transfer", "-g", group, "-p", peers, "--leader", leader,
            "--to", transferee, "--term", Long.toString(term)))) {
            if (line.startsWith("TRANSFER ")) {
                return Integer.parseInt(line.split(" ")[1]);
            }
        }
        throw new AssertionError("the Java transfer printed no TRANSFER line");
    }

    /**
     * Reads indexes 0 .. {@code last} with GET through the Java client (which sends them to the leader it
     * finds); index → SHA-256 of the body.
     */
    Map<Long, String> javaGetAll(long last) {
        Path file = dir.resolve("indexes-" + (runs + 1) + ".txt");
        try {
            Files.writeString(file, Stream.iterate(0L, i -> i <= last, i -> i + 1).map(String::valueOf)
                .collect(Collectors.joining("\n")) + "\n");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        Map<Long, String> got = new TreeMap<>();
        for (String line : finish(javaClient("get", "get", "-g", group, "-p", peers, "--indexes", file.toString(),
            "--deadline-seconds", "150"))) {
            String[] f = line.split(" ");
            if (f[0].equals("GOT")) {
                got.put(Long.parseLong(f[1]), f[4]);
            }
        }
        return got;
    }

    // ---- our client ----

    private ChildProcess ours(String what, String... args) {
        runs++;
        List<String> cmd = new ArrayList<>(List.of(DLedgerMember.ourBinary().toString()));
        cmd.addAll(Arrays.asList(args));
        return ChildProcess.builder("our dledger " + what + " (run " + runs + ")")
            .command(cmd)
            .directory(dir)
            .env("RUST_LOG", "warn")
            .output(dir.resolve("ours-" + runs + "-" + what + ".out"), dir.resolve("ours-" + runs + "-" + what + ".err"))
            .start();
    }

    /** Runs our client once; its stdout, or null if it exited non-zero (no leader yet, a call failed). */
    private String oursOnce(String what, String... args) {
        ChildProcess run = ours(what, args);
        try {
            return run.awaitExit(Duration.ofSeconds(20)) == 0 ? run.stdout() : null;
        } finally {
            run.close();
        }
    }

    /**
     * One entry appended with our {@code dledger append}, retried until an answer has code 200; the leader and
     * term that answer named. Cheap (no JVM): also how the tests learn who leads.
     */
    Leader ourAppend() {
        long item = nextItem++;
        String data = new String(body(item), StandardCharsets.US_ASCII);
        String sha = sha256(body(item));
        return Await.until("our dledger append of item " + item, CLIENT_RUN, () -> {
            String out = oursOnce("append", "append", "-g", group, "-p", peers, "-d", data);
            Matcher m = out == null ? null : OUR_APPEND.matcher(out);
            if (m == null || !m.find() || json(m.group(1), "code") != 200) {
                return null;
            }
            String json = m.group(1);
            ack(json(json, "index"), sha, "our client");
            Matcher leader = Pattern.compile("\"leaderId\":\"([^\"]+)\"").matcher(json);
            assertTrue(leader.find(), "leaderId in " + json);
            leadersSeen.add(leader.group(1) + "@" + json(json, "term"));
            return new Leader(leader.group(1), json(json, "term"));
        }, l -> l != null, this::describe);
    }

    private static long json(String json, String key) {
        Matcher m = Pattern.compile("\"" + key + "\":(-?\\d+)").matcher(json);
        if (!m.find()) {
            throw new AssertionError("no " + key + " in " + json);
        }
        return Long.parseLong(m.group(1));
    }

    /** The body our {@code dledger get} reads at {@code index}, as its SHA-256 (retried until code 200). */
    String ourGet(long index) {
        return Await.until("our dledger get of index " + index, CLIENT_RUN, () -> {
            String out = oursOnce("get", "get", "-g", group, "-p", peers, "-i", Long.toString(index));
            if (out == null || !out.contains("Get Result:{\"code\":200")) {
                return null;
            }
            String prefix = "Get Result index:" + index + " ";
            return out.lines().filter(l -> l.startsWith(prefix)).findFirst()
                .map(l -> sha256(l.substring(prefix.length()).getBytes(StandardCharsets.US_ASCII))).orElse(null);
        }, s -> s != null, this::describe);
    }

    /** One LEADERSHIP_TRANSFER through our client; the answer's code (-1 if the call failed). */
    int ourTransfer(String leader, String transferee, long term) {
        String out = oursOnce("transfer", "leadershipTransfer", "-g", group, "-p", peers, "-l", leader, "-t", transferee,
            "--term", Long.toString(term));
        Matcher m = out == null ? null : OUR_TRANSFER.matcher(out);
        return m != null && m.find() ? Integer.parseInt(m.group(1)) : -1;
    }

    /**
     * Moves the leadership to {@code target} with LEADERSHIP_TRANSFER sent to the current leader, through the
     * Java client or ours; returns once an append acknowledged by {@code target} as leader says it leads. A
     * transfer can be refused (the transferee fell behind, an election raced it): then it is asked again.
     */
    Leader transferTo(String target, boolean javaClient) {
        long deadline = System.nanoTime() + TRANSFER.toNanos();
        List<String> tries = new ArrayList<>();
        while (true) {
            Leader now = ourAppend();
            if (now.id().equals(target)) {
                return now;
            }
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("leadership never moved to " + target + "; transfers: " + tries + "\n" + describe());
            }
            int code = javaClient ? javaTransfer(now.id(), target, now.term()) : ourTransfer(now.id(), target, now.term());
            tries.add(now.id() + "@" + now.term() + "->" + target + ": " + code);
            transfers.add((javaClient ? "Java " : "ours ") + now.id() + "@" + now.term() + "->" + target + ":" + code);
            if (code != 200) {
                sleep(300);
            }
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted", e);
        }
    }

    /**
     * GET of every index up to the last acknowledged one under {@code leader}: every acknowledged index has its
     * body; the term is the same before and after, so the leader that answered was {@code leader}. Returns what
     * was read (index → body hash), acknowledged or not.
     */
    Map<Long, String> readAllUnder(Leader leader) {
        long last = acked.lastKey();
        Map<Long, String> got = javaGetAll(last);
        Leader after = ourAppend();
        assertEquals(leader, after, "the leader while the Java client read every entry");
        for (Map.Entry<Long, String> e : acked.headMap(last, true).entrySet()) {
            assertEquals(e.getValue(), got.get(e.getKey()), "GET of acknowledged index " + e.getKey() + " from " + leader
                + " (files in " + dir + ")");
        }
        // Our client reads a few too: the first, a middle and the last acknowledged entry.
        for (long index : List.of(acked.firstKey(), last / 2, last)) {
            if (acked.containsKey(index)) {
                assertEquals(acked.get(index), ourGet(index), "our dledger get of index " + index + " from " + leader);
            }
        }
        return got;
    }

    /**
     * Waits until every member's index unit at the last acknowledged index is the leader's, byte for byte (index,
     * term, pos, size): by Raft's log matching each then holds the whole log up to there. A follower the last
     * appends reached after their quorum would otherwise be stopped a few entries short. Read while running:
     * both write through shared mappings, so the file shows what was written.
     */
    void awaitAllHoldTheLastAcknowledged() {
        long last = acked.lastKey();
        Await.until("every member holding index " + last, Duration.ofSeconds(30), () -> {
            byte[] ref = null;
            for (DLedgerMember m : members) {
                byte[] unit;
                try {
                    unit = read(m.nodeDir().resolve("index"), last * INDEX_UNIT, (last + 1) * INDEX_UNIT);
                } catch (AssertionError notYet) {
                    return false; // no segment holds the unit yet
                }
                if (ByteBuffer.wrap(unit).getInt(0) == 0 || ByteBuffer.wrap(unit).getLong(16) != last) {
                    return false;
                }
                if (ref != null && !Arrays.equals(ref, unit)) {
                    return false;
                }
                ref = unit;
            }
            return true;
        }, this::describe);
    }

    /** For the test output: leaders (id@term) that acknowledged appends, the transfers sent, the comparison. */
    String summary() {
        return "DLedger group " + group + ": leaders " + leadersSeen + "; transfers " + transfers + "; " + compared;
    }

    void stopAll() {
        for (DLedgerMember m : members) {
            m.stop();
        }
    }

    @Override
    public void close() {
        members.forEach(DLedgerMember::close);
    }

    // ---- the stores ----

    /** {@code checkpoint}: committedIndex and endIndex, written at every checkpoint and at shutdown. */
    static Map<String, Long> checkpoint(DLedgerMember m) {
        return DLedgerFiles.checkpoint(m.nodeDir());
    }

    /**
     * With every member stopped cleanly: every member's log ends at or after the last acknowledged index, and the
     * data and index segments of all members are byte-identical over [0, the common end).
     *
     * <p>The common end is the smallest endIndex of the checkpoints (the tests end with every member having been
     * leader with no append after, so it is the last acknowledged index). Past it the files may differ, and
     * legitimately so: segments are preallocated at full size, and a member that cut an uncommitted tail (a killed
     * leader's entries no quorum held, dropped when it rejoined) keeps those bytes after its new write position
     * until they are overwritten — neither implementation zeroes a truncated tail, and neither is read past the
     * end. checkpoint and currterm are not compared: committedIndex reaches followers with a delay, and voteFor
     * differs by member.
     */
    long assertStoresIdentical() {
        Map<String, Map<String, Long>> checkpoints = new LinkedHashMap<>();
        long end = Long.MAX_VALUE;
        for (DLedgerMember m : members) {
            assertTrue(!m.isAlive(), m + " must be stopped before its files are compared");
            Map<String, Long> cp = checkpoint(m);
            checkpoints.put(m.label(), cp);
            end = Math.min(end, cp.get("endIndex"));
        }
        long lastAcked = acked.lastKey();
        assertTrue(end >= lastAcked, "every member holds every acknowledged entry (last " + lastAcked + "): " + checkpoints);
        DLedgerMember first = members.get(0);
        // Index units of 0 .. end; the data up to the end of entry `end`, from its unit.
        long indexEnd = (end + 1) * INDEX_UNIT;
        ByteBuffer unit = ByteBuffer.wrap(read(first.nodeDir().resolve("index"), end * INDEX_UNIT, indexEnd));
        assertEquals(end, unit.getLong(16), "index of the unit at " + end + " in " + first);
        long dataEnd = unit.getLong(4) + unit.getInt(12);
        assertTrue(dataEnd > 3L * DATA_SEGMENT && indexEnd > INDEX_SEGMENT,
            "the log crosses several data and index segments: data end " + dataEnd + ", index end " + indexEnd);
        for (DLedgerMember m : members.subList(1, members.size())) {
            assertSameBytes(first, m, "index", indexEnd);
            assertSameBytes(first, m, "data", dataEnd);
        }
        compared = "entries 0.." + end + " (" + acked.size() + " acknowledged), data [0, " + dataEnd + "), index [0, "
            + indexEnd + ") identical on " + members.stream().map(DLedgerMember::label).toList() + "; checkpoints " + checkpoints;
        // Every index unit points at its entry: magic, size, index and pos of the entry header agree.
        ByteBuffer index = ByteBuffer.wrap(read(first.nodeDir().resolve("index"), 0, indexEnd));
        for (long i = 0; i <= end; i++) {
            int at = Math.toIntExact(i * INDEX_UNIT);
            long pos = index.getLong(at + 4);
            int size = index.getInt(at + 12);
            ByteBuffer header = ByteBuffer.wrap(read(first.nodeDir().resolve("data"), pos, pos + 48));
            assertEquals(size, header.getInt(4), "size of entry " + i);
            assertEquals(i, header.getLong(8), "index in the header of entry " + i);
            assertEquals(pos, header.getLong(24), "pos in the header of entry " + i);
            if (acked.containsKey(i)) {
                byte[] body = read(first.nodeDir().resolve("data"), pos + 48, pos + size);
                assertEquals(acked.get(i), sha256(body), "body of acknowledged entry " + i + " on disk");
            }
        }
        return end;
    }

    private static void assertSameBytes(DLedgerMember a, DLedgerMember b, String folder, long end) {
        DLedgerFiles.assertSameBytes(a.nodeDir(), a.label(), b.nodeDir(), b.label(), folder, end);
    }

    /** Bytes [from, to) of a segmented folder (big-endian, as both write them). */
    private static byte[] read(Path dir, long from, long to) {
        return DLedgerFiles.read(dir, from, to);
    }
}
