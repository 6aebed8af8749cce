package rocketmq.compat.proxy;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import static org.junit.jupiter.api.Assertions.assertEquals;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.CleanupMode;
import org.junit.jupiter.api.io.TempDir;
import rocketmq.compat.broker.BrokerProbe;
import rocketmq.compat.broker.RustBroker;
import rocketmq.compat.client.DriverRun;
import rocketmq.compat.client.ProduceConsumeRun;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.harness.FreePorts;
import rocketmq.compat.harness.Started;
import rocketmq.compat.harness.TcpProbe;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.runtime.Versions;

/**
 * The RocketMQ 5 gRPC path in LOCAL mode: our {@code mqbroker --enable-proxy -pc rmq-proxy.json} serves
 * {@code apache.rocketmq.v2.MessagingService} itself, with no Java proxy, driven by rocketmq-client-java
 * ({@code GrpcDriver}; plaintext, and one run with SSL on against the same port) through the scenarios of {@link ProxyGrpcTest}, whose
 * Java side (Java's proxy 5.3.3 in front of a Java broker 5.3.3) shows the scenarios are right. The broker has the
 * same extra keys; rmq-proxy.json the same 1 s minimum invisible duration.
 */
@DisplayName("gRPC clients against our mqbroker --enable-proxy (local mode)")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class LocalProxyGrpcTest extends GrpcScenarioTests {
    private static final Duration DRIVER_TIMEOUT = Duration.ofSeconds(240);

    @TempDir(cleanup = CleanupMode.ON_SUCCESS)
    static Path dir;
    private final Started started = new Started();
    private RustBroker broker;
    private DriverRun run;
    private DriverRun tlsRun;
    private int remotingPort;

    @BeforeAll
    void start() throws Exception {
        System.out.println("LocalProxyGrpcTest folder (kept on failure): " + dir);
        NameServer ns = started.own(NameServer.start(dir.resolve("namesrv"), "rust"));
        int grpcPort = FreePorts.one();
        remotingPort = FreePorts.one();
        Path proxyConf = dir.resolve("rmq-proxy.json");
        Files.createDirectories(dir);
        try {
            Files.writeString(proxyConf, "{\"grpcServerPort\": " + grpcPort + ", \"remotingListenPort\": " + remotingPort
                + ", \"minInvisibleTimeMillsForRecv\": 1000}");
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        broker = started.own(RustBroker.start(dir.resolve("broker"), ns.address(), "GrpcLocalCluster", "grpc-local-a",
            ProxyGrpcTest.BROKER_EXTRA, List.of("--enable-proxy", "-pc", proxyConf.toString())));
        Await.until("gRPC port 127.0.0.1:" + grpcPort, Duration.ofSeconds(30), () -> TcpProbe.accepts(grpcPort),
            () -> broker.describe(60));
        ProxyGrpcTest.prepare(ns.address(), broker.address(), "grpc-local-a", () -> broker.describe(60));
        // The TLS run's own topic: a new group reads a topic from its start while it is in memory (as Java).
        try (BrokerProbe probe = BrokerProbe.connect(broker.address(), "grpc-local-a")) {
            probe.createTopic("GrpcTls", 4, "+message.type=NORMAL");
            probe.createTopic("ViaProxyPort", 4, "+message.type=NORMAL");
            probe.createTopic("GrpcOnRemotingPort", 4, "+message.type=NORMAL");
        }
        DriverRun.Running running = started.own(DriverRun.start("GrpcDriver", "rocketmq-client-java", Versions.CLIENT_JAVA,
            "JSON", dir.resolve("driver"), ProxyGrpcTest.args("127.0.0.1:" + grpcPort)));
        run = running.await(DRIVER_TIMEOUT);
        System.out.println("our broker, local proxy: " + run.summary());
        // Then the same port with SSL on (the client's default): TLS is detected per connection, as Java's
        // permissive mode, with a self-signed certificate made at start (the client trusts any).
        tlsRun = started.own(DriverRun.start("GrpcDriver", "rocketmq-client-java", Versions.CLIENT_JAVA, "JSON",
            dir.resolve("driver-tls"), "tls:127.0.0.1:" + grpcPort, "normal:GrpcTls:grpc-tls:20"))
            .await(DRIVER_TIMEOUT);
        System.out.println("our broker, local proxy, TLS: " + tlsRun.summary());
    }

    @AfterAll
    void stop() {
        started.close();
    }

    @Override
    void assertStep(String step) {
        assertStep(run, step);
    }

    @Override
    void assertInDlq() throws Exception {
        ProxyGrpcTest.assertInDlq(broker.address(), "grpc-local-a");
    }

    private void assertStep(DriverRun run, String step) {
        Map<String, String> r = run.result(step);
        if (!"OK".equals(r.get("status"))) {
            throw new AssertionError("step " + step + " "
                + (r.isEmpty() ? "printed no RESULT" : r.get("status") + ": " + r.get("reason") + "\n  facts: " + r)
                + "\n" + run.report() + "\n" + broker.describe(100));
        }
    }

    @Test
    @DisplayName("the same port with SSL on: normal sends, receive and ack over TLS")
    void normalOverTls() {
        assertStep(tlsRun, "normal");
    }

    @Test
    @DisplayName("the proxy's remoting port as name server and broker: a 5.x remoting producer and push consumer through it")
    void remotingClientThroughTheProxysRemotingPort() {
        ProduceConsumeRun remoting = ProduceConsumeRun.run(Versions.JAVA_5, "JSON", "127.0.0.1:" + remotingPort, "ViaProxyPort", 100,
            dir.resolve("remoting-driver"));
        System.out.println("remoting client through the proxy's remoting port: " + remoting.summary());
        assertEquals(0, remoting.exitCode(), remoting.report() + "\n" + broker.describe(60));
        assertEquals("OK", remoting.field("status"), remoting.report());
    }

    @Test
    @DisplayName("the proxy's remoting port takes gRPC clients too (Java's multi-protocol port)")
    void grpcClientOnTheRemotingPort() {
        DriverRun viaRemotingPort = DriverRun.start("GrpcDriver", "rocketmq-client-java", Versions.CLIENT_JAVA, "JSON",
            dir.resolve("driver-remoting-port"), "127.0.0.1:" + remotingPort, "normal:GrpcOnRemotingPort:grpc-remoting-port:10").await(DRIVER_TIMEOUT);
        System.out.println("gRPC client on the proxy's remoting port: " + viaRemotingPort.summary());
        assertStep(viaRemotingPort, "normal");
    }
}
