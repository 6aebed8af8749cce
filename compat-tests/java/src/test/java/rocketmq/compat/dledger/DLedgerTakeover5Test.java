package rocketmq.compat.dledger;

import java.nio.file.Path;
import java.util.List;
import java.util.Map;
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
 * The round trip of {@link DLedgerTakeoverTest} with Java 5.3.3 (also DLedger 0.3.1.2), the DLedger data in a folder
 * of its own ({@code storePathDLedgerCommitLog}): Java 5.3.3 writes 3,600 messages on an empty store and is killed
 * (SIGKILL, once the group's offsets are in config/consumerOffset.json), so its DLedger checkpoint may lag what it
 * acknowledged; ours starts on its files after the crash, serves everything, takes new messages while the group
 * resumes and a fresh group reads from the first offset, and stops; Java 5.3.3 starts on ours' files, serves
 * everything and takes more. The checks are those of {@link DLedgerTakeoverTest}; keys stored before the crash need
 * not be found by ours any more, or may be found twice (what Java does, {@link DlbChecks#assertQueries}).
 *
 * <p>Java 5.3.3 is not restarted after a crash here: its DLedger crash recovery counts the records it walks without
 * their 48-byte entry headers, truncates its consume queues below the real end, and dispatches again only from the
 * DLedger checkpoint's committed position, so messages it acknowledged can be missing from its consume queues for
 * good ({@code -Drmq.dledger.takeover=5.3.3}, Java in ours' part, showed 5 of 500 messages of a queue not
 * served again within 60 s). Our broker must not do that, and does not get the chance to hide it: it starts after the crash.
 */
@DisplayName("DLedger store handed over: Java 5.3.3 (SIGKILL) -> ours -> Java 5.3.3")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class DLedgerTakeover5Test {
    @TempDir(cleanup = CleanupMode.ON_SUCCESS)
    static Path dir;
    private final String oursKind = System.getProperty("rmq.dledger.takeover", "ours");
    private DlbTakeover takeover;

    @BeforeAll
    void start() {
        takeover = new DlbTakeover(dir, "DlbTakeover5Cluster", "dlb-takeover5",
            Map.of("storePathDLedgerCommitLog", dir.resolve("node/store/dlcommitlog").toString()));
    }

    @AfterAll
    void stop() {
        takeover.close();
    }

    @Test
    void everyMessageSurvivesAJavaCrashAndTheWayBack() throws Exception {
        long t = System.nanoTime();
        String a = DlbTakeover.TOPIC_A;
        String b = DlbTakeover.TOPIC_B;
        takeover.javaWrites(Versions.JAVA_5, End.KILL);
        takeover.phase(oursKind, Round.withConsumers("o2", DlbTraffic.counts(a, 600, b, 300), Versions.JAVA_5, "ROCKETMQ",
            List.of("consume:" + b + ":dlb_fresh_b_o2:b:1000:90"), a, DlbTakeover.G1, Versions.JAVA_49, "JSON"), End.STOP);
        takeover.phase(Versions.JAVA_5, Round.sendOnly("j3", DlbTraffic.counts(a, 300, b, 200), Versions.JAVA_49, "JSON",
            List.of()), End.STOP);
        System.out.printf("takeover 5.3.3: %d messages through three starts, %d ms%n", takeover.log.size(),
            (System.nanoTime() - t) / 1_000_000);
    }
}
