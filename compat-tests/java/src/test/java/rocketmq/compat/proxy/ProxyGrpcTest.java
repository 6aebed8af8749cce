package rocketmq.compat.proxy;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
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
import rocketmq.compat.harness.Started;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * The RocketMQ 5 gRPC path: Java's proxy 5.3.3 in CLUSTER mode in front of a name server and one broker, driven by
 * the gRPC client rocketmq-client-java ({@code GrpcDriver} in a child JVM). Twice, at the same time: a Java name
 * server 5.3.3 with a Java broker 5.3.3 (which shows the scenarios are right), and our name server with our broker;
 * every scenario must pass on both. Topics are created with their 5.x {@code message.type} (the proxy checks a
 * send's type against the topic's, read with GET_TOPIC_CONFIG), the FIFO group as consuming orderly; the other
 * groups are created by the brokers when the proxy first asks for them (GET_SUBSCRIPTIONGROUP_CONFIG). Both brokers
 * run with timers on and a 5 s transaction check interval (a half message is checked once 6 s old, Java's default); the proxy with
 * a 1 s minimum invisible duration and a transaction heartbeat every 2 s, so the class stays short.
 */
@DisplayName("gRPC clients through Java's proxy 5.3.3: Java broker and ours")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class ProxyGrpcTest extends GrpcScenarioTests {
    private static final Duration ROUTE_TIMEOUT = Duration.ofSeconds(60);
    private static final Duration DRIVER_TIMEOUT = Duration.ofSeconds(240);
    static final Map<String, String> BROKER_EXTRA = Map.of(
        "timerWheelEnable", "true",
        // longer than Java's transactionOpBatchInterval (3 s): a check sooner after a commit by check can miss that
        // commit's op and commit the half message again (a Java 5.3.3 broker then delivers it twice)
        "transactionCheckInterval", "5000",
        // RECALL_MESSAGE is refused by default (Java's recallMessageEnable=false)
        "recallMessageEnable", "true");
    private static final Map<String, Object> PROXY_EXTRA = Map.of(
        "minInvisibleTimeMillsForRecv", 1000,
        "transactionHeartbeatPeriodSecond", 2);
    /** topic, its message.type, the steps' arguments after topic and group. */
    static final String[][] TOPICS = {
        {"GrpcNormal", "NORMAL"},
        {"GrpcInvisible", "NORMAL"},
        {"GrpcFifo", "FIFO"},
        {"GrpcDelay", "DELAY"},
        {"GrpcTx", "TRANSACTION"},
        {"GrpcPush", "NORMAL"},
        {"GrpcRecall", "DELAY"},
        {"GrpcDlq", "NORMAL"},
    };
    static final String[] STEPS = {
        "normal:GrpcNormal:grpc-normal:20",
        "invisible:GrpcInvisible:grpc-invisible",
        "fifo:GrpcFifo:grpc-fifo:4:25",
        "delay:GrpcDelay:grpc-delay:5:3000",
        "transaction:GrpcTx:grpc-tx",
        "pushOnce:GrpcPush:grpc-push:200",
        "recall:GrpcRecall:grpc-recall",
        "dlq:GrpcDlq:grpc-dlq",
    };
    /** The dlq step's groups: 2 deliveries each (retryMaxTimes 1), then the DLQ. */
    static final String[] DLQ_GROUPS = {"grpc-dlq", "grpc-dlq-push"};

    /** {@code -Drmq.proxy.sides=java} (or {@code ours}) runs one side only, to look at it alone; default both. */
    private static final String SIDES = System.getProperty("rmq.proxy.sides", "java,ours");

    /** Kept when a test fails: the proxies', brokers' and drivers' logs. */
    @TempDir(cleanup = CleanupMode.ON_SUCCESS)
    static Path dir;
    private final Started started = new Started();
    private DriverRun javaRun;
    private DriverRun ourRun;
    private JavaProxy javaProxy;
    private JavaProxy ourProxy;
    private JavaBroker javaBroker;
    private RustBroker ourBroker;

    @BeforeAll
    void start() throws Exception {
        System.out.println("ProxyGrpcTest folder (kept on failure): " + dir);
        boolean runJava = SIDES.contains("java");
        boolean runOurs = SIDES.contains("ours");
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            // The Java side: Java's name server and broker behind the proxy.
            Future<JavaProxy> javaSide = !runJava ? null : pool.submit(() -> {
                NameServer ns = started.own(NameServer.start(dir.resolve("java-namesrv"), "java"));
                javaBroker = started.own(JavaBroker.start(Versions.JAVA_5, dir.resolve("java-broker"), ns.address(),
                    "GrpcJavaCluster", "grpc-java-a", BROKER_EXTRA));
                prepare(ns.address(), javaBroker.address(), "grpc-java-a", () -> javaBroker.describe(60));
                return started.own(JavaProxy.start(Versions.JAVA_5, dir.resolve("java-proxy"), ns.address(), "GrpcJavaCluster",
                    PROXY_EXTRA));
            });
            // Ours: our name server and broker behind the same proxy.
            Future<JavaProxy> ourSide = !runOurs ? null : pool.submit(() -> {
                NameServer ns = started.own(NameServer.start(dir.resolve("our-namesrv"), "rust"));
                ourBroker = started.own(RustBroker.start(dir.resolve("our-broker"), ns.address(), "GrpcOurCluster",
                    "grpc-ours-a", BROKER_EXTRA));
                prepare(ns.address(), ourBroker.address(), "grpc-ours-a", () -> ourBroker.describe(60));
                return started.own(JavaProxy.start(Versions.JAVA_5, dir.resolve("our-proxy"), ns.address(), "GrpcOurCluster",
                    PROXY_EXTRA));
            });
            javaProxy = javaSide == null ? null : javaSide.get();
            ourProxy = ourSide == null ? null : ourSide.get();
        } finally {
            pool.shutdown();
        }
        DriverRun.Running java = javaProxy == null ? null : started.own(DriverRun.start("GrpcDriver", "rocketmq-client-java",
            Versions.CLIENT_JAVA, "JSON", dir.resolve("java-driver"), args(javaProxy.endpoint())));
        DriverRun.Running ours = ourProxy == null ? null : started.own(DriverRun.start("GrpcDriver", "rocketmq-client-java",
            Versions.CLIENT_JAVA, "JSON", dir.resolve("our-driver"), args(ourProxy.endpoint())));
        if (java != null) {
            javaRun = java.await(DRIVER_TIMEOUT);
            System.out.println("Java broker: " + javaRun.summary());
        }
        if (ours != null) {
            ourRun = ours.await(DRIVER_TIMEOUT);
            System.out.println("our broker:  " + ourRun.summary());
        }
    }

    /** The driver's arguments: the endpoint, then every step ({@code -Drmq.proxy.steps=fifo,delay}: those only). */
    static String[] args(String endpoint) {
        List<String> only = List.of(System.getProperty("rmq.proxy.steps", "").split(","));
        List<String> a = new ArrayList<>(List.of(endpoint));
        for (String step : STEPS) {
            if (only.equals(List.of("")) || only.contains(step.substring(0, step.indexOf(':')))) {
                a.add(step);
            }
        }
        return a.toArray(new String[0]);
    }

    /** Creates the topics (with message.type) and the FIFO group, and waits until the name server routes them. */
    static void prepare(String namesrv, String brokerAddress, String brokerName,
                                java.util.function.Supplier<String> diagnostics) throws Exception {
        try (BrokerProbe probe = BrokerProbe.connect(brokerAddress, brokerName);
             NamesrvProbe ns = NamesrvProbe.connect(namesrv)) {
            for (String[] t : TOPICS) {
                probe.createTopic(t[0], 4, "+message.type=" + t[1]);
            }
            probe.createGroup("grpc-fifo", true);
            for (String g : DLQ_GROUPS) {
                probe.createGroup(g, 1);
            }
            for (String[] t : TOPICS) {
                Await.until("route of " + t[0], ROUTE_TIMEOUT, () -> ns.route(t[0]),
                    (TopicRouteData r) -> r != null && !r.getQueueDatas().isEmpty(), diagnostics);
            }
        }
    }

    @AfterAll
    void stop() {
        started.close();
    }

    /** The step passed on the Java side (the scenario is right) and on ours. */
    @Override
    void assertStep(String step) {
        if (javaRun != null) {
            check("the Java broker", javaRun, step, javaProxy, javaBroker::describe);
        }
        if (ourRun != null) {
            check("our broker", ourRun, step, ourProxy, ourBroker::describe);
        }
    }

    private static void check(String side, DriverRun run, String step, JavaProxy proxy,
                              java.util.function.IntFunction<String> broker) {
        Map<String, String> r = run.result(step);
        if (!"OK".equals(r.get("status"))) {
            throw new AssertionError("through " + side + ": step " + step + " "
                + (r.isEmpty() ? "printed no RESULT" : r.get("status") + ": " + r.get("reason") + "\n  facts: " + r)
                + "\n" + run.report() + "\n" + proxy.describe(60) + "\n" + broker.apply(100));
        }
    }

    @Override
    void assertInDlq() throws Exception {
        if (javaRun != null) {
            assertInDlq(javaBroker.address(), "grpc-java-a");
        }
        if (ourRun != null) {
            assertInDlq(ourBroker.address(), "grpc-ours-a");
        }
    }

    /** Each of the dlq step's groups has its one message in its DLQ topic. */
    static void assertInDlq(String brokerAddress, String brokerName) throws Exception {
        try (BrokerProbe probe = BrokerProbe.connect(brokerAddress, brokerName)) {
            for (String g : DLQ_GROUPS) {
                org.junit.jupiter.api.Assertions.assertEquals(1, probe.maxOffset("%DLQ%" + g, 0),
                    "messages in %DLQ%" + g + " on " + brokerName);
            }
        }
    }
}
