package rocketmq.compat.proxy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.CleanupMode;
import org.junit.jupiter.api.io.TempDir;
import rocketmq.compat.broker.BrokerProbe;
import rocketmq.compat.broker.JavaBroker;
import rocketmq.compat.broker.RustBroker;
import rocketmq.compat.client.DriverRun;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.harness.FreePorts;
import rocketmq.compat.harness.Started;
import rocketmq.compat.harness.TcpProbe;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * The same bad gRPC requests ({@code GrpcBadInputDriver}, raw {@code apache.rocketmq.v2} stubs) sent to Java's proxy
 * 5.3.3 (cluster mode, in front of a Java name server and broker 5.3.3) and to our {@code mqbroker --enable-proxy}:
 * every case must end with the same gRPC status and {@code Status.code}, and the same {@code Status.message} but
 * where Java's names something of its own process (a broker address, a stack detail).
 */
@DisplayName("bad gRPC requests: our local proxy answers as Java's proxy 5.3.3")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class GrpcBadInputTest {
    private static final Duration DRIVER_TIMEOUT = Duration.ofSeconds(120);
    private static final String NORMAL = "BadInputNormal";
    private static final String FIFO = "BadInputFifo";
    private static final String GROUP = "bad-input-group";
    private static final String DELAY = "BadInputDelay";
    /**
     * Cases where Java's proxy fails on an exception of its own (a NullPointerException without client settings,
     * IllegalArgumentException from ReceiptHandle.decode (change, forward) or from sizing a list by a negative batch) and its message
     * carries the exception's class and source frame: code compared, message not.
     */
    private static final Set<String> MESSAGE_NOT_COMPARED = Set.of("receive.noSettings", "change.malformedHandle",
        "forward.malformedHandle", "receive.batchNegative");

    @TempDir(cleanup = CleanupMode.ON_SUCCESS)
    static Path dir;
    private final Started started = new Started();
    private Map<String, String> javaCases;
    private Map<String, String> ourCases;
    private DriverRun javaRun;
    private DriverRun ourRun;

    @BeforeAll
    void start() throws Exception {
        System.out.println("GrpcBadInputTest folder (kept on failure): " + dir);
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            Future<String> javaSide = pool.submit(() -> {
                NameServer ns = started.own(NameServer.start(dir.resolve("java-namesrv"), "java"));
                JavaBroker broker = started.own(JavaBroker.start(Versions.JAVA_5, dir.resolve("java-broker"), ns.address(),
                    "BadJavaCluster", "bad-java-a", ProxyGrpcTest.BROKER_EXTRA));
                prepare(ns.address(), broker.address(), "bad-java-a", () -> broker.describe(60));
                return started.own(JavaProxy.start(Versions.JAVA_5, dir.resolve("java-proxy"), ns.address(), "BadJavaCluster",
                    Map.of())).endpoint();
            });
            Future<String> ourSide = pool.submit(() -> {
                NameServer ns = started.own(NameServer.start(dir.resolve("our-namesrv"), "rust"));
                int grpcPort = FreePorts.one();
                Path conf = dir.resolve("rmq-proxy.json");
                Files.writeString(conf, "{\"grpcServerPort\": " + grpcPort + "}");
                RustBroker broker = started.own(RustBroker.start(dir.resolve("our-broker"), ns.address(), "BadOurCluster",
                    "bad-ours-a", ProxyGrpcTest.BROKER_EXTRA, List.of("--enable-proxy", "-pc", conf.toString())));
                Await.until("gRPC port " + grpcPort, Duration.ofSeconds(30), () -> TcpProbe.accepts(grpcPort),
                    () -> broker.describe(60));
                prepare(ns.address(), broker.address(), "bad-ours-a", () -> broker.describe(60));
                return "127.0.0.1:" + grpcPort;
            });
            String javaEndpoint = javaSide.get();
            String ourEndpoint = ourSide.get();
            DriverRun.Running java = started.own(DriverRun.start("GrpcBadInputDriver", "rocketmq-proxy", Versions.JAVA_5, "JSON",
                dir.resolve("java-driver"), javaEndpoint, "bad-java-a", NORMAL, FIFO, GROUP, DELAY));
            DriverRun.Running ours = started.own(DriverRun.start("GrpcBadInputDriver", "rocketmq-proxy", Versions.JAVA_5, "JSON",
                dir.resolve("our-driver"), ourEndpoint, "bad-ours-a", NORMAL, FIFO, GROUP, DELAY));
            javaRun = java.await(DRIVER_TIMEOUT);
            ourRun = ours.await(DRIVER_TIMEOUT);
        } finally {
            pool.shutdown();
        }
        javaCases = cases(javaRun);
        ourCases = cases(ourRun);
        javaCases.forEach((k, v) -> System.out.println("Java " + k + " " + v));
        ourCases.forEach((k, v) -> System.out.println("ours " + k + " " + v));
    }

    private static void prepare(String namesrv, String brokerAddress, String brokerName,
                                java.util.function.Supplier<String> diagnostics) throws Exception {
        try (BrokerProbe probe = BrokerProbe.connect(brokerAddress, brokerName);
             NamesrvProbe ns = NamesrvProbe.connect(namesrv)) {
            probe.createTopic(NORMAL, 4, "+message.type=NORMAL");
            probe.createTopic(FIFO, 4, "+message.type=FIFO");
            probe.createTopic(DELAY, 4, "+message.type=DELAY");
            for (String t : List.of(NORMAL, FIFO, DELAY)) {
                Await.until("route of " + t, Duration.ofSeconds(60), () -> ns.route(t),
                    (TopicRouteData r) -> r != null && !r.getQueueDatas().isEmpty(), diagnostics);
            }
        }
    }

    /** name → "grpc=... code=... message=..." of every CASE line. */
    private static Map<String, String> cases(DriverRun run) {
        Map<String, String> out = new LinkedHashMap<>();
        for (String[] words : run.lines("CASE ")) {
            out.put(words[0], String.join(" ", List.of(words).subList(1, words.length)));
        }
        if (out.isEmpty() || run.lines("DONE").isEmpty()) {
            throw new AssertionError("the driver did not finish\n" + run.report());
        }
        return out;
    }

    @AfterAll
    void stop() {
        started.close();
    }

    @Test
    @DisplayName("every case: Java's gRPC status, Status.code and (where stable) message")
    void sameAnswers() {
        List<String> differences = new ArrayList<>();
        for (Map.Entry<String, String> e : javaCases.entrySet()) {
            String java = e.getValue();
            String ours = ourCases.getOrDefault(e.getKey(), "(none)");
            boolean same = MESSAGE_NOT_COMPARED.contains(e.getKey())
                ? java.substring(0, java.indexOf(" message=")).equals(ours.substring(0, Math.max(0, ours.indexOf(" message="))))
                : java.equals(ours);
            if (!same) {
                differences.add(e.getKey() + "\n    Java: " + java + "\n    ours: " + ours);
            }
        }
        if (!differences.isEmpty()) {
            throw new AssertionError(differences.size() + " of " + javaCases.size() + " cases differ:\n  "
                + String.join("\n  ", differences));
        }
    }
}
