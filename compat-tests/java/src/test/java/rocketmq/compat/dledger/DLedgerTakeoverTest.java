package rocketmq.compat.dledger;

import java.nio.file.Path;
import java.util.List;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.CleanupMode;
import org.junit.jupiter.api.io.TempDir;
import rocketmq.compat.dledger.DlbTakeover.End;
import rocketmq.compat.dledger.DlbTraffic.Round;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.runtime.Versions;

/**
 * A DLedger-mode store (single-member group n0, 1 MiB segments) handed between Java 4.9.7 and ours, with one
 * broker.conf and one set of ports for all: Java writes 3,600 messages on an empty store (two topics, a group consumes
 * the first 2,000 of one) and stops; ours starts on Java's files and stops; Java starts on ours'; then ours again, is
 * killed (SIGKILL), and Java starts after the crash. Each start must register as master and serve everything stored
 * before it: every message pulled from offset 0 of its queue unchanged (queue offset, commit-log offset = DLedger entry
 * pos + 48, size, body) and found by its key, the group's committed offsets kept. Each takes new messages (all
 * SEND_OK); on ours' first start and on Java's start after the crash the group resumes at its committed offsets
 * meanwhile (nothing below them, nothing twice, everything after) and a fresh group reads the topic from its first
 * offset (all, once), and ours serves a fresh group all old messages of the other topic. After every stop or kill
 * the DLedger data is one log from pos 0 (contiguous indexes, non-decreasing terms, entries where 0.3.1.2 puts them)
 * holding exactly the messages served. After the crash a key stored before it need not be found any more (if found,
 * it must be the right message): Java 4.9.7 loses them from its index for good ({@link DlbChecks#assertQueries}).
 *
 * <p>{@code -Drmq.dledger.takeover=4.9.7} plays ours' part with Java 4.9.7 too: the assertions describe what Java
 * does, and were checked that way.
 */
@DisplayName("DLedger store handed over: Java 4.9.7 -> ours -> Java 4.9.7 -> ours (SIGKILL) -> Java 4.9.7")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class DLedgerTakeoverTest {
    @TempDir(cleanup = CleanupMode.ON_SUCCESS)
    static Path dir;
    private final String oursKind = System.getProperty("rmq.dledger.takeover", "ours");
    private DlbTakeover takeover;

    @BeforeAll
    void start() {
        takeover = new DlbTakeover(dir, "DlbTakeoverCluster", "dlb-takeover", java.util.Map.of());
    }

    @AfterAll
    void stop() {
        takeover.close();
    }

    @Test
    void everyMessageSurvivesEachHandOverBothWaysAndAKill() throws Exception {
        long t = System.nanoTime();
        String a = DlbTakeover.TOPIC_A;
        String b = DlbTakeover.TOPIC_B;
        String g1 = DlbTakeover.G1;
        takeover.javaWrites(Versions.JAVA_49, End.STOP);
        takeover.phase(oursKind, Round.withConsumers("o2", DlbTraffic.counts(a, 600, b, 300), Versions.JAVA_5, "ROCKETMQ",
            List.of("consume:" + b + ":dlb_fresh_b_o2:b:1000:90"), a, g1, Versions.JAVA_49, "JSON"), End.STOP);
        takeover.phase(Versions.JAVA_49, Round.sendOnly("j3", DlbTraffic.counts(a, 300, b, 200), Versions.JAVA_49, "JSON",
            List.of()), End.STOP);
        takeover.phase(oursKind, Round.sendOnly("o4", DlbTraffic.counts(a, 400, b, 200), Versions.JAVA_5, "ROCKETMQ", List.of()),
            End.KILL);
        takeover.phase(Versions.JAVA_49, Round.withConsumers("j5", DlbTraffic.counts(a, 200, b, 100), Versions.JAVA_49, "ROCKETMQ",
            List.of(), a, g1, Versions.JAVA_5, "JSON"), End.STOP);
        System.out.printf("takeover 4.9.7: %d messages through five starts, %d ms%n", takeover.log.size(),
            (System.nanoTime() - t) / 1_000_000);
    }
}
