package rocketmq.compat.mqadmin;

import static org.junit.jupiter.api.Assertions.assertAll;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.charset.StandardCharsets;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.function.Supplier;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import rocketmq.compat.broker.JavaBroker;
import rocketmq.compat.broker.RustBroker;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * mqadmin 5.3.3's store and flow-control commands against our broker and, side by side, a Java 5.3.3 broker
 * (default store, no controller) behind the same name server: the cold-data flow control config
 * ({@code updateColdDataFlowCtrGroupConfig}, {@code getColdDataFlowCtrInfo}, {@code removeColdDataFlowCtrGroupConfig}),
 * {@code setCommitLogReadAheadMode}, {@code resetMasterFlushOffset}, {@code getBrokerEpoch},
 * {@code checkRocksdbCqWriteProgress} and {@code rocksDBConfigToJson}. Each command prints the same against both,
 * once the broker's address and name are masked. (The removal's effect, mode 0 and the bad inputs are in the cargo test
 * t62_store_admin; this class keeps to one run per command and broker, about 50 s.)
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class MqAdminStoreCommandsTest {
    private static final String RUST_CLUSTER = "StoreAdminRust";
    private static final String RUST_BROKER = "store-admin-rust";
    private static final String JAVA_CLUSTER = "StoreAdminJava";
    private static final String JAVA_BROKER = "store-admin-java";

    @TempDir
    static Path dir;
    private NameServer namesrv;
    private RustBroker ours;
    private JavaBroker java;
    private NamesrvProbe probe;
    private MqAdmin mqadmin;
    private MQClientAPIImpl api;

    @BeforeAll
    void start() {
        namesrv = NameServer.start(dir.resolve("namesrv"));
        ours = RustBroker.start(dir.resolve("rust-broker"), namesrv.address(), RUST_CLUSTER, RUST_BROKER);
        java = JavaBroker.start(Versions.JAVA_5, dir.resolve("java-broker"), namesrv.address(), JAVA_CLUSTER, JAVA_BROKER);
        probe = NamesrvProbe.connect(namesrv.address());
        Await.until("both brokers registered", Duration.ofSeconds(30), probe::clusterInfo,
            info -> info.getBrokerAddrTable() != null && info.getBrokerAddrTable().containsKey(RUST_BROKER)
                && info.getBrokerAddrTable().containsKey(JAVA_BROKER),
            () -> ours + " / " + java.describe(20));
        mqadmin = new MqAdmin(Versions.JAVA_5, "ROCKETMQ", namesrv.address(), dir.resolve("mqadmin-5"));
        api = new MQClientAPIImpl(new NettyClientConfig(), null, null, new ClientConfig());
        api.start();
    }

    @AfterAll
    void stop() throws Exception {
        if (api != null) {
            api.shutdown();
        }
        for (AutoCloseable c : new AutoCloseable[] {probe, java, ours, namesrv}) {
            if (c != null) {
                c.close();
            }
        }
    }

    @Test
    void storeCommandsPrintWhatTheyPrintAgainstJava() {
        // Three independent sequences at once: an mqadmin run mostly waits for its client to start and stop.
        List<CompletableFuture<Void>> sequences = List.of(
            CompletableFuture.runAsync(this::coldDataFlowControl),
            CompletableFuture.runAsync(this::readAheadResetAndEpoch),
            CompletableFuture.runAsync(this::rocksdbCommands));
        assertAll(sequences.stream().map(s -> () -> {
            try {
                s.join();
            } catch (java.util.concurrent.CompletionException e) {
                throw e.getCause();
            }
        }));
    }

    /** The same requests to both brokers: the same code, remark and body, byte for byte (bad inputs included). */
    @Test
    void rawAnswersAreJavasByteForByte() throws Exception {
        // Four groups, so the config table's order is that of Java's ConcurrentHashMap.
        List<String> requests = List.of(
            "2001|body=rawB=5\nrawA=7\nRawGroupX=9\nzz1=-3\n", "2003|", "2001|body=rawA=8\n", "2003|",
            "2001|body=bad\\u12=1\n", "2002|body=rawA", "2003|",
            "2004|READ_AHEAD_MODE=1", "2004|READ_AHEAD_MODE=0", "2004|READ_AHEAD_MODE=2", "2004|READ_AHEAD_MODE=x", "2004|",
            "908|masterFlushOffset=4096", "354|topic=SomeTopic|checkStoreTime=0", "1007|", "200056|",
            "355|configType=topics;subscriptionGroups;consumerOffsets;", "355|configType=TOPICS",
            "2002|body=rawB", "2002|body=RawGroupX", "2002|body=zz1", "2003|");
        List<String> fromJava = new ArrayList<>();
        List<String> fromOurs = new ArrayList<>();
        for (String r : requests) {
            fromJava.add(r + "  ->  " + answer(java.address(), r));
            fromOurs.add(r + "  ->  " + answer(ours.address(), r));
        }
        assertEquals(String.join("\n", fromJava), String.join("\n", fromOurs));
        // An unknown config type: Java's remark adds the stack frame of its exception.
        String javaRemark = answer(java.address(), "355|configType=bogus");
        String ourRemark = answer(ours.address(), "355|configType=bogus");
        assertTrue(javaRemark.startsWith(ourRemark.replace(" body null", "")), "Java: " + javaRemark + "\nours: " + ourRemark);
        assertTrue(ourRemark.startsWith("code 1 remark java.lang.IllegalArgumentException: Unknown config type: bogus"), ourRemark);
    }

    /** "CODE|key=value|...", a "body=" entry being the body: sent with the 4.9.7 client's remoting. */
    private String answer(String addr, String spec) throws Exception {
        String[] parts = spec.split("\\|");
        RemotingCommand request = RemotingCommand.createRequestCommand(Integer.parseInt(parts[0]), null);
        for (int i = 1; i < parts.length; i++) {
            if (parts[i].isEmpty()) {
                continue;
            }
            String[] kv = parts[i].split("=", 2);
            if (kv[0].equals("body")) {
                request.setBody(kv[1].replace("\\n", "\n").getBytes(StandardCharsets.UTF_8));
            } else {
                request.addExtField(kv[0], kv[1]);
            }
        }
        RemotingCommand response = api.getRemotingClient().invokeSync(addr, request, 5000);
        String body = response.getBody() == null ? "null" : new String(response.getBody(), StandardCharsets.UTF_8);
        return "code " + response.getCode() + " remark " + response.getRemark() + " body " + body;
    }

    private void coldDataFlowControl() {
        Pair update = onBoth("updateColdDataFlowCtrGroupConfig", "-b", "ADDR", "-g", "cgA", "-v", "100");
        update.assertSameOutput();
        assertTrue(update.ours.stdout().contains("updateColdDataFlowCtrGroupConfig success, " + ours.address()), update.ours.describe());
        Pair info = onBoth("getColdDataFlowCtrInfo", "-b", "ADDR");
        info.assertSameOutput();
        String shown = info.ours.stdout().replaceAll("\\s", "");
        assertTrue(shown.contains("\"cgA\":100") && shown.contains("\"cgColdReadThreshold\":3145728"), info.ours.describe());
        Pair remove = onBoth("removeColdDataFlowCtrGroupConfig", "-b", "ADDR", "-g", "cgA");
        remove.assertSameOutput();
        assertTrue(remove.ours.stdout().contains("remove broker cold read threshold success, " + ours.address()), remove.ours.describe());
    }

    private void readAheadResetAndEpoch() {
        // Mode 1 (MADV_RANDOM); t62_store_admin covers 0 and the refusals.
        Pair readAhead = onBoth("setCommitLogReadAheadMode", "-b", "ADDR", "-m", "1");
        readAhead.assertSameOutput();
        assertTrue(readAhead.ours.stdout().contains("set commitlog readahead mode success, mode: 1"), readAhead.ours.describe());
        // POP_ROLLBACK (200056; rawAnswersAreJavasByteForByte has its answer): mqadmin's ROCKETMQ header
        // encoding writes the code in 16 bits, 3448, which both brokers refuse, as they refuse pop's codes.
        Pair export = onBoth("exportPopRecord", "-b", "ADDR");
        export.assertSameOutput();
        assertTrue(export.ours.stdout().contains("Export broker records error, brokerName=" + RUST_BROKER + ", brokerAddr="
            + ours.address() + ", dryRun=false") && export.ours.stdout().contains("request type 3448 not supported"),
            export.ours.describe());
        // With JSON headers the code arrives whole: both answer SUCCESS.
        MqAdmin json = new MqAdmin(Versions.JAVA_5, "JSON", namesrv.address(), dir.resolve("mqadmin-5-json"));
        for (String[] broker : new String[][] {{ours.address(), RUST_BROKER}, {java.address(), JAVA_BROKER}}) {
            MqAdminRun run = json.run("exportPopRecord", "-b", broker[0]);
            assertTrue(run.stdout().contains("Export broker records, brokerName=" + broker[1] + ", brokerAddr=" + broker[0]
                + ", dryRun=false"), run.describe());
        }
        Pair reset = onBoth("resetMasterFlushOffset", "-b", "ADDR", "-o", "4096");
        reset.assertSameOutput();
        assertTrue(reset.ours.stdout().contains("reset master flush offset to 4096 success"), reset.ours.describe());
        // Only a controller-mode broker has an epoch cache: both refuse.
        Pair epoch = onBoth("getBrokerEpoch", "-b", "NAME");
        epoch.assertSameOutput();
        for (MqAdminRun run : List.of(epoch.ours, epoch.java)) {
            assertTrue(run.stderr().contains("CODE: 1  DESC: this request only for controllerMode"), run.describe());
        }
    }

    private void rocksdbCommands() {
        // Both commands go to every broker the name server knows once the cluster exists: one run covers both.
        MqAdminRun check = mqadmin.run("checkRocksdbCqWriteProgress", "-c", RUST_CLUSTER);
        for (String broker : List.of(RUST_BROKER, JAVA_BROKER)) {
            assertTrue(check.stdout().contains(broker + " check doing, please wait and get the result from log..."), check.describe());
        }
        assertFalse(check.stdout().contains("check error"), check.describe());
        MqAdminRun export = mqadmin.run("rocksDBConfigToJson", "-c", RUST_CLUSTER);
        assertTrue(export.stdout().contains("Use [rpc mode] call all brokers in cluster to export to json file"), export.describe());
        assertTrue(export.stdout().contains("broker export done."), export.describe());
        assertFalse(export.stdout().contains("export error") || export.stderr().contains("Exception"), export.describe());
    }

    /** One command against our broker and Java's, "ADDR" and "NAME" standing for each broker's address and name. */
    private Pair onBoth(String command, String... args) {
        CompletableFuture<MqAdminRun> onOurs = CompletableFuture.supplyAsync(run(command, args, ours.address(), RUST_BROKER));
        MqAdminRun onJava = run(command, args, java.address(), JAVA_BROKER).get();
        return new Pair(onOurs.join(), onJava);
    }

    private Supplier<MqAdminRun> run(String command, String[] args, String addr, String name) {
        String[] actual = new String[args.length];
        for (int i = 0; i < args.length; i++) {
            actual[i] = args[i].equals("ADDR") ? addr : args[i].equals("NAME") ? name : args[i];
        }
        return () -> mqadmin.run(command, actual);
    }

    private final class Pair {
        final MqAdminRun ours;
        final MqAdminRun java;

        Pair(MqAdminRun ours, MqAdminRun java) {
            this.ours = ours;
            this.java = java;
        }

        void assertSameOutput() {
            assertEquals(masked(java.stdout(), MqAdminStoreCommandsTest.this.java.address(), JAVA_BROKER),
                masked(ours.stdout(), MqAdminStoreCommandsTest.this.ours.address(), RUST_BROKER),
                "stdout against Java 5.3.3 vs ours" + java.describe() + ours.describe());
            assertEquals(firstLine(masked(java.stderr(), MqAdminStoreCommandsTest.this.java.address(), JAVA_BROKER)),
                firstLine(masked(ours.stderr(), MqAdminStoreCommandsTest.this.ours.address(), RUST_BROKER)),
                "first stderr line" + java.describe() + ours.describe());
        }
    }

    private static String masked(String output, String addr, String name) {
        return output.replace(addr, "ADDR").replace(name, "NAME");
    }

    private static String firstLine(String text) {
        return text.lines().findFirst().orElse("");
    }
}
