package rocketmq.compat.proxy;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.CleanupMode;
import org.junit.jupiter.api.io.TempDir;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import rocketmq.compat.broker.BrokerProbe;
import rocketmq.compat.broker.JavaBroker;
import rocketmq.compat.broker.RustBroker;
import rocketmq.compat.client.DriverRun;
import rocketmq.compat.client.ProduceConsumeRun;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.harness.Started;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

/**
 * The RocketMQ 5 gRPC path in CLUSTER mode through OUR proxy: {@code mqproxy -pc rmq-proxy.json -n NAMESRV} in front
 * of a name server and one broker, driven by rocketmq-client-java ({@code GrpcDriver}) through the scenarios of
 * {@link ProxyGrpcTest} (whose Java side, Java's proxy in front of Java's broker, shows they are right). Twice, at
 * the same time: our name server with our broker, and Java's name server 5.3.3 with a Java broker 5.3.3 (the proxy
 * reads routes, topic configs and groups, and talks to the broker, over remoting only). Same topics, groups, broker
 * keys and 1 s minimum invisible duration as {@link ProxyGrpcTest}.
 */
@DisplayName("gRPC clients through our mqproxy (cluster mode): our broker and Java's")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class ClusterProxyGrpcTest extends GrpcScenarioTests {
    private static final Duration DRIVER_TIMEOUT = Duration.ofSeconds(240);
    private static final Map<String, Object> PROXY_EXTRA = Map.of("minInvisibleTimeMillsForRecv", 1000);
    /** The NORMAL topic a remoting client sends to and consumes from through the proxy's remoting port. */
    private static final String REMOTING_TOPIC = "ViaProxyPort";
    /** The TRANSACTION topic of the remoting client's transactions through the proxy's remoting port. */
    private static final String REMOTING_TX_TOPIC = "ViaProxyPortTx";

    /** {@code -Drmq.proxy.sides=java} (or {@code ours}) runs one side only; default both. */
    private static final String SIDES = System.getProperty("rmq.proxy.sides", "java,ours");

    @TempDir(cleanup = CleanupMode.ON_SUCCESS)
    static Path dir;
    private final Started started = new Started();
    private DriverRun javaRun;
    private DriverRun ourRun;
    private RustProxy javaSideProxy;
    private RustProxy ourSideProxy;
    private JavaBroker javaBroker;
    private RustBroker ourBroker;

    @BeforeAll
    void start() throws Exception {
        System.out.println("ClusterProxyGrpcTest folder (kept on failure): " + dir);
        boolean runJava = SIDES.contains("java");
        boolean runOurs = SIDES.contains("ours");
        ExecutorService pool = Executors.newFixedThreadPool(2);
        try {
            Future<RustProxy> javaSide = !runJava ? null : pool.submit(() -> {
                NameServer ns = started.own(NameServer.start(dir.resolve("java-namesrv"), "java"));
                javaBroker = started.own(JavaBroker.start(Versions.JAVA_5, dir.resolve("java-broker"), ns.address(),
                    "GrpcJavaCluster", "grpc-java-a", ProxyGrpcTest.BROKER_EXTRA));
                ProxyGrpcTest.prepare(ns.address(), javaBroker.address(), "grpc-java-a", () -> javaBroker.describe(60));
                prepareRemotingTopic(ns.address(), javaBroker.address(), "grpc-java-a", () -> javaBroker.describe(60));
                return started.own(RustProxy.start(dir.resolve("java-side-proxy"), ns.address(), "GrpcJavaCluster", PROXY_EXTRA));
            });
            Future<RustProxy> ourSide = !runOurs ? null : pool.submit(() -> {
                NameServer ns = started.own(NameServer.start(dir.resolve("our-namesrv"), "rust"));
                ourBroker = started.own(RustBroker.start(dir.resolve("our-broker"), ns.address(), "GrpcOurCluster",
                    "grpc-ours-a", ProxyGrpcTest.BROKER_EXTRA));
                ProxyGrpcTest.prepare(ns.address(), ourBroker.address(), "grpc-ours-a", () -> ourBroker.describe(60));
                prepareRemotingTopic(ns.address(), ourBroker.address(), "grpc-ours-a", () -> ourBroker.describe(60));
                return started.own(RustProxy.start(dir.resolve("our-side-proxy"), ns.address(), "GrpcOurCluster", PROXY_EXTRA));
            });
            javaSideProxy = javaSide == null ? null : javaSide.get();
            ourSideProxy = ourSide == null ? null : ourSide.get();
        } finally {
            pool.shutdown();
        }
        DriverRun.Running java = javaSideProxy == null ? null : started.own(DriverRun.start("GrpcDriver",
            "rocketmq-client-java", Versions.CLIENT_JAVA, "JSON", dir.resolve("java-driver"),
            ProxyGrpcTest.args(javaSideProxy.endpoint())));
        DriverRun.Running ours = ourSideProxy == null ? null : started.own(DriverRun.start("GrpcDriver",
            "rocketmq-client-java", Versions.CLIENT_JAVA, "JSON", dir.resolve("our-driver"),
            ProxyGrpcTest.args(ourSideProxy.endpoint())));
        if (java != null) {
            javaRun = java.await(DRIVER_TIMEOUT);
            System.out.println("our proxy, Java broker: " + javaRun.summary());
        }
        if (ours != null) {
            ourRun = ours.await(DRIVER_TIMEOUT);
            System.out.println("our proxy, our broker:  " + ourRun.summary());
        }
    }

    /** {@link #REMOTING_TOPIC} and {@link #REMOTING_TX_TOPIC}, created on the broker and waited for in the name server's routes. */
    private static void prepareRemotingTopic(String namesrv, String brokerAddress, String brokerName,
                                             java.util.function.Supplier<String> diagnostics) throws Exception {
        try (BrokerProbe probe = BrokerProbe.connect(brokerAddress, brokerName);
             NamesrvProbe ns = NamesrvProbe.connect(namesrv)) {
            probe.createTopic(REMOTING_TOPIC, 4, "+message.type=NORMAL");
            probe.createTopic(REMOTING_TX_TOPIC, 4, "+message.type=TRANSACTION");
            for (String topic : List.of(REMOTING_TOPIC, REMOTING_TX_TOPIC)) {
                Await.until("route of " + topic, Duration.ofSeconds(60), () -> ns.route(topic),
                    (TopicRouteData r) -> r != null && !r.getQueueDatas().isEmpty(), diagnostics);
            }
        }
    }

    @AfterAll
    void stop() {
        started.close();
    }

    /** The step passed through our proxy in front of the Java broker and in front of ours. */
    @Override
    void assertStep(String step) {
        if (javaRun != null) {
            check("our proxy and the Java broker", javaRun, step, javaSideProxy, javaBroker::describe);
        }
        if (ourRun != null) {
            check("our proxy and our broker", ourRun, step, ourSideProxy, ourBroker::describe);
        }
    }

    @Override
    void assertInDlq() throws Exception {
        if (javaRun != null) {
            ProxyGrpcTest.assertInDlq(javaBroker.address(), "grpc-java-a");
        }
        if (ourRun != null) {
            ProxyGrpcTest.assertInDlq(ourBroker.address(), "grpc-ours-a");
        }
    }

    private static void check(String side, DriverRun run, String step, RustProxy proxy,
                              java.util.function.IntFunction<String> broker) {
        Map<String, String> r = run.result(step);
        if (!"OK".equals(r.get("status"))) {
            throw new AssertionError("through " + side + ": step " + step + " "
                + (r.isEmpty() ? "printed no RESULT" : r.get("status") + ": " + r.get("reason") + "\n  facts: " + r)
                + "\n" + run.report() + "\n" + proxy.describe(80) + "\n" + broker.apply(100));
        }
    }

    @Test
    @DisplayName("a remoting client (Java 5.3.3) through our proxy's remoting port: 100 messages sent and consumed")
    void remotingClientThroughTheProxysRemotingPort() {
        if (javaSideProxy != null) {
            remotingRun("our proxy and the Java broker", javaSideProxy, "java-side", javaBroker::describe);
        }
        if (ourSideProxy != null) {
            remotingRun("our proxy and our broker", ourSideProxy, "our-side", ourBroker::describe);
        }
    }

    @Test
    @DisplayName("a remoting client's transactions through our proxy's remoting port: the broker's checks reach it there")
    void remotingTransactionsThroughTheProxysRemotingPort() {
        if (javaSideProxy != null) {
            remotingTransactions("our proxy and the Java broker", javaSideProxy, "java-side", javaBroker::describe, true);
        }
        if (ourSideProxy != null) {
            remotingTransactions("our proxy and our broker", ourSideProxy, "our-side", ourBroker::describe, false);
        }
    }

    /**
     * ReliabilityDriver's COMMIT, ROLLBACK and UNKNOW half messages, the UNKNOW ones resolved by CHECK_TRANSACTION_STATE.
     * The driver's last check (no REAL_TOPIC on a committed message) is our broker's: a Java 5.3.3 broker keeps it
     * (its {@code EndTransactionProcessor.endMessageTransaction} clears the property map after writing the properties
     * string it stores), so on the Java side that one failure, after every other check passed, is its own behaviour.
     */
    private static void remotingTransactions(String side, RustProxy proxy, String name, java.util.function.IntFunction<String> broker,
                                             boolean javaBroker) {
        DriverRun run = DriverRun.run("ReliabilityDriver", "rocketmq-client", Versions.JAVA_5, "JSON",
            dir.resolve(name + "-remoting-tx"), proxy.remotingEndpoint(), "transactions:" + REMOTING_TX_TOPIC);
        System.out.println("remoting transactions through " + side + ": " + run.summary());
        Map<String, String> r = run.result("transactions");
        String diagnostics = run.report() + "\n" + proxy.describe(80) + "\n" + broker.apply(60);
        boolean javasRealTopic = javaBroker && "FAILED".equals(r.get("status"))
            && String.valueOf(r.get("reason")).contains("still has REAL_TOPIC");
        if (!javasRealTopic) {
            assertEquals("OK", r.get("status"), diagnostics);
            assertEquals(0, run.exitCode(), diagnostics);
        }
        // 5 UNKNOW ones to commit and 5 to roll back, each asked about at least once
        assertTrue(Integer.parseInt(r.getOrDefault("checked", "0")) >= 10, "open transactions checked back through the port\n" + diagnostics);
    }

    private static void remotingRun(String side, RustProxy proxy, String name, java.util.function.IntFunction<String> broker) {
        ProduceConsumeRun run = ProduceConsumeRun.run(Versions.JAVA_5, "JSON", proxy.remotingEndpoint(), REMOTING_TOPIC, 100,
            dir.resolve(name + "-remoting-driver"));
        System.out.println("remoting client through " + side + ": " + run.summary());
        String diagnostics = run.report() + "\n" + proxy.describe(80) + "\n" + broker.apply(60);
        assertEquals(0, run.exitCode(), diagnostics);
        assertEquals("OK", run.field("status"), diagnostics);
    }
}
