package rocketmq.compat.dledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.Timeout;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.CleanupMode;
import org.junit.jupiter.api.io.TempDir;
import rocketmq.compat.dledger.DLedgerGroup.Leader;
import rocketmq.compat.dledger.DLedgerMember.Kind;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.ChildProcess;
import rocketmq.compat.harness.DumpLogsOnFailure;

/**
 * DLedger groups of Java DLedger 0.3.1.2 members (the real jars, through compat-tests/dledger-node) and ours
 * ({@code dledger server}), on loopback with short heartbeats and 64 KiB data / 8 KiB index segments.
 *
 * <ul>
 *   <li>1 Java + 2 ours, and 2 Java + 1 ours: appends through the Java {@code DLedgerClient} and our
 *   {@code dledger append} are acknowledged under each member in turn as leader (LEADERSHIP_TRANSFER through the
 *   Java client and through ours), and while the leader is killed (SIGKILL) in the middle of an append run; the
 *   killed member comes back on its store. Then each member in turn leads again and GET of every index returns
 *   the acknowledged bodies, the same from every leader; the stores of all three are byte-identical.</li>
 *   <li>Store takeover: a member's directory written by Java is continued by ours (after SIGTERM), which leads and
 *   appends on it; then ours is killed and Java continues that directory, leads and appends; every acknowledged
 *   entry is read back from it and the three stores are byte-identical.</li>
 * </ul>
 *
 * <p>A missing Java, javac, classpath file or binary fails (never skips).
 */
@DisplayName("DLedger groups of Java 0.3.1.2 and our members")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class MixedGroupTest {
    private static final int BATCH = 120;
    /** The run the leader is killed in (the 10,000 appends), and how many are acknowledged before the kill. */
    private static final int LOAD = 10_000;
    private static final int BEFORE_KILL = 3_000;

    /** Kept when a test fails: the members' output, the client runs and the stores are in it. */
    @TempDir(cleanup = CleanupMode.ON_SUCCESS)
    static Path dir;

    @Test
    @DisplayName("1 Java + 2 of ours: transfers to each, a killed leader, GET from each leader, identical stores")
    @Timeout(value = 360, unit = TimeUnit.SECONDS)
    void oneJavaTwoOurs() {
        mixedGroup("mix1j2r", List.of(Kind.JAVA, Kind.OURS, Kind.OURS));
    }

    @Test
    @DisplayName("2 Java + 1 of ours: transfers to each, a killed leader, GET from each leader, identical stores")
    @Timeout(value = 360, unit = TimeUnit.SECONDS)
    void twoJavaOneOurs() {
        mixedGroup("mix2j1r", List.of(Kind.JAVA, Kind.JAVA, Kind.OURS));
    }

    private void mixedGroup(String name, List<Kind> kinds) {
        try (DLedgerGroup g = new DLedgerGroup(name, dir.resolve(name), kinds)) {
            g.startAll();
            Leader first = g.ourAppend();
            assertTrue(g.javaAppends(BATCH).contains(first.id()), "appends acknowledged under the first leader " + first);

            // The leadership goes to each member in turn, starting after the first leader and ending with it, so
            // each gets a LEADERSHIP_TRANSFER (alternately through the Java client and ours); appends continue
            // under each, through both clients.
            boolean javaClient = true;
            int at = g.members.indexOf(g.member(first.id()));
            for (int k = 1; k <= g.members.size(); k++) {
                DLedgerMember m = g.members.get((at + k) % g.members.size());
                Leader now = g.transferTo(m.id(), javaClient);
                javaClient = !javaClient;
                Set<String> leaders = g.javaAppends(BATCH);
                assertTrue(leaders.contains(m.id()), "appends acknowledged under " + m + " (" + now + "): leaders " + leaders);
                g.ourAppend();
            }

            // The leader is killed in the middle of an append run: the Java client finds the new leader and goes on.
            Leader before = g.ourAppend();
            DLedgerMember victim = g.member(before.id());
            ChildProcess run = g.startJavaAppends(LOAD, 16);
            Await.until(BEFORE_KILL + " appends acknowledged before the kill", java.time.Duration.ofSeconds(90),
                () -> run.stdout().lines().filter(l -> l.startsWith("OK ")).count() >= BEFORE_KILL, g::describe);
            victim.kill();
            Set<String> leaders = g.finishJavaAppends(run);
            Leader after = g.ourAppend();
            assertTrue(!after.id().equals(victim.id()) && after.term() > before.term(),
                "a new leader after " + victim + " was killed: " + before + " then " + after);
            assertTrue(leaders.contains(after.id()) || leaders.size() > 1, "appends went on under the new leader: " + leaders);
            victim.start(victim.kind());
            g.javaAppends(BATCH / 2);

            // Each member leads once more; GET of every index returns the acknowledged bodies, the same from each.
            Map<Long, String> reference = null;
            for (DLedgerMember m : g.members) {
                Leader leader = g.transferTo(m.id(), javaClient);
                javaClient = !javaClient;
                Map<Long, String> got = g.readAllUnder(leader);
                if (reference != null) {
                    for (Map.Entry<Long, String> e : reference.entrySet()) {
                        assertEquals(e.getValue(), got.get(e.getKey()), "GET " + e.getKey() + " under " + m + " and before");
                    }
                }
                reference = got;
            }

            g.awaitAllHoldTheLastAcknowledged();
            g.stopAll();
            long end = g.assertStoresIdentical();
            assertTrue(end >= LOAD, "entries in the log: " + end);
            System.out.println(g.summary());
        }
    }

    @Test
    @DisplayName("store takeover: Java's directory continued by ours, then ours by Java, nothing acknowledged lost")
    @Timeout(value = 150, unit = TimeUnit.SECONDS)
    void storeTakeover() {
        String name = "takeover";
        try (DLedgerGroup g = new DLedgerGroup(name, dir.resolve(name), List.of(Kind.JAVA, Kind.OURS, Kind.JAVA))) {
            g.startAll();
            DLedgerMember n0 = g.member("n0");
            // Java writes n0's directory, leading part of the time.
            g.transferTo("n0", true);
            g.javaAppends(BATCH);
            g.ourAppend();

            // Ours continues it after a clean stop: catches up, leads, appends as leader on Java's files.
            n0.stop();
            g.javaAppends(BATCH / 2);
            n0.start(Kind.OURS);
            Leader ours = g.transferTo("n0", false);
            assertTrue(g.javaAppends(BATCH).contains("n0"), "appends acknowledged under " + n0);
            g.readAllUnder(ours);

            // Java continues the directory ours wrote, after a crash of ours (SIGKILL: no checkpoint at the end).
            n0.kill();
            g.javaAppends(BATCH / 2);
            n0.start(Kind.JAVA);
            Leader java = g.transferTo("n0", true);
            assertTrue(g.javaAppends(BATCH).contains("n0"), "appends acknowledged under " + n0);
            g.readAllUnder(java);

            g.awaitAllHoldTheLastAcknowledged();
            g.stopAll();
            g.assertStoresIdentical();
            System.out.println(g.summary());
        }
    }
}
