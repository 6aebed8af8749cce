package rocketmq.compat.proxy;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.CleanupMode;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.CsvSource;
import rocketmq.compat.broker.BrokerProbe;
import rocketmq.compat.broker.RustBroker;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.ChildProcess;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.harness.FreePorts;
import rocketmq.compat.harness.Started;
import rocketmq.compat.harness.TcpProbe;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.CompatDirs;

/**
 * The official RocketMQ 5 Python and Node.js clients (pinned in compat-tests/grpc-clients: rocketmq-python-client
 * in python/requirements.txt, rocketmq-client-nodejs in node/package.json) against our {@code mqbroker
 * --enable-proxy} (local mode): each runs compat-tests/grpc-clients/LANG/scenarios.* as a child process, both at
 * once, on its own topics, and each scenario prints one RESULT line. The clients come from
 * scripts/setup-tools.sh (a venv in python/.venv, node_modules in node/); a missing interpreter or package fails.
 */
@DisplayName("Python and Node.js 5.x gRPC clients against our mqbroker --enable-proxy (local mode)")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class GrpcClientsTest {
    private static final Duration CLIENT_TIMEOUT = Duration.ofSeconds(150);
    private static final Duration ROUTE_TIMEOUT = Duration.ofSeconds(60);
    private static final String[] LANGS = {"Py", "Js"};
    /** Topic suffix and message.type; the groups are prefix-lowercased + "-" + the step. */
    private static final String[][] TOPICS = {
        {"Normal", "NORMAL"}, {"Invisible", "NORMAL"}, {"Fifo", "FIFO"}, {"Delay", "DELAY"}, {"Tx", "TRANSACTION"},
    };

    @TempDir(cleanup = CleanupMode.ON_SUCCESS)
    static Path dir;
    private final Started started = new Started();
    private final Map<String, ChildProcess> clients = new ConcurrentHashMap<>();
    private final Map<String, Integer> exitCodes = new ConcurrentHashMap<>();
    private RustBroker broker;

    @BeforeAll
    void start() throws Exception {
        System.out.println("GrpcClientsTest folder (kept on failure): " + dir);
        Path clientsDir = CompatDirs.compatDir().resolve("grpc-clients");
        List<String> python = List.of(interpreter(clientsDir.resolve("python/.venv/bin/python"), "python"),
            clientsDir.resolve("python/scenarios.py").toString());
        List<String> node = List.of(interpreter(nodeBinary(), "node"), clientsDir.resolve("node/scenarios.js").toString());
        requireFile(clientsDir.resolve("node/node_modules/rocketmq-client-nodejs/package.json"), "the Node.js client");

        NameServer ns = started.own(NameServer.start(dir.resolve("namesrv"), "rust"));
        int grpcPort = FreePorts.one();
        Path proxyConf = dir.resolve("rmq-proxy.json");
        Files.writeString(proxyConf, "{\"grpcServerPort\": " + grpcPort + ", \"remotingListenPort\": " + FreePorts.one()
            + ", \"minInvisibleTimeMillsForRecv\": 1000}");
        broker = started.own(RustBroker.start(dir.resolve("broker"), ns.address(), "GrpcClientsCluster", "grpc-clients-a",
            ProxyGrpcTest.BROKER_EXTRA, List.of("--enable-proxy", "-pc", proxyConf.toString())));
        Await.until("gRPC port 127.0.0.1:" + grpcPort, Duration.ofSeconds(30), () -> TcpProbe.accepts(grpcPort),
            () -> broker.describe(60));
        try (BrokerProbe probe = BrokerProbe.connect(broker.address(), "grpc-clients-a");
             NamesrvProbe nsProbe = NamesrvProbe.connect(ns.address())) {
            for (String lang : LANGS) {
                for (String[] t : TOPICS) {
                    probe.createTopic(lang + t[0], 4, "+message.type=" + t[1]);
                }
                probe.createGroup(lang.toLowerCase() + "-fifo", true);
            }
            for (String lang : LANGS) {
                for (String[] t : TOPICS) {
                    Await.until("route of " + lang + t[0], ROUTE_TIMEOUT, () -> nsProbe.route(lang + t[0]),
                        (TopicRouteData r) -> r != null && !r.getQueueDatas().isEmpty(), () -> broker.describe(60));
                }
            }
        }
        String endpoint = "127.0.0.1:" + grpcPort;
        startClient("Py", python, endpoint, clientsDir.resolve("python"));
        startClient("Js", node, endpoint, clientsDir.resolve("node"));
        for (Map.Entry<String, ChildProcess> c : clients.entrySet()) {
            exitCodes.put(c.getKey(), c.getValue().awaitExit(CLIENT_TIMEOUT));
            System.out.println(c.getValue().name() + ": exit code " + exitCodes.get(c.getKey()) + "\n"
                + resultLines(c.getValue()));
        }
    }

    private void startClient(String lang, List<String> command, String endpoint, Path workDir) {
        Path home = dir.resolve("home-" + lang);
        List<String> args = new ArrayList<>(command);
        args.add(endpoint);
        args.add(lang);
        clients.put(lang, started.own(ChildProcess.builder(lang.equals("Py") ? "python client" : "node client")
            .command(args)
            .directory(workDir)
            // the clients write their logs under $HOME/logs
            .env("HOME", home.toString())
            .env("PYTHONUNBUFFERED", "1")
            .output(dir.resolve("client-" + lang + ".log"))
            .start()));
    }

    /** The interpreter: fails (not skips) when it is missing. */
    private static String interpreter(Path path, String what) {
        requireFile(path, what);
        return path.toString();
    }

    private static void requireFile(Path path, String what) {
        if (!Files.exists(path)) {
            throw new AssertionError(what + " not found at " + path
                + ": run scripts/setup-tools.sh (it installs the pinned Python and Node.js clients)");
        }
    }

    /** node on PATH (setup-tools.sh installs it when missing). */
    private static Path nodeBinary() {
        for (String d : System.getenv().getOrDefault("PATH", "").split(":")) {
            Path p = Path.of(d.isEmpty() ? "." : d, "node");
            if (Files.isExecutable(p)) {
                return p.toAbsolutePath();
            }
        }
        throw new AssertionError("node not found on PATH: run scripts/setup-tools.sh");
    }

    private static String resultLines(ChildProcess c) {
        StringBuilder sb = new StringBuilder();
        for (String line : c.stdout().split("\n")) {
            // SETTINGS-RETRY: a Python client replaced once for want of settings (scenarios.py's Started)
            if (line.startsWith("RESULT ") || line.startsWith("SETTINGS-RETRY ")) {
                sb.append("  ").append(line).append('\n');
            }
        }
        return sb.toString();
    }

    @AfterAll
    void stop() {
        started.close();
    }

    @ParameterizedTest(name = "{0} client")
    @DisplayName("each client's script ends by itself with exit code 0 (every step passed, nothing crashed after)")
    @CsvSource({"Py", "Js"})
    void exitsZero(String lang) {
        if (exitCodes.get(lang) != 0) {
            throw new AssertionError(clients.get(lang).name() + " exit code " + exitCodes.get(lang) + "\n"
                + clients.get(lang).describe(120));
        }
    }

    @ParameterizedTest(name = "{0} client: {1}")
    @DisplayName("each scenario passes with each client")
    @CsvSource({
        "Py, normal", "Py, invisible", "Py, fifo", "Py, delay", "Py, transaction",
        "Js, normal", "Js, invisible", "Js, fifo", "Js, delay", "Js, transaction",
    })
    void scenario(String lang, String step) {
        ChildProcess c = clients.get(lang);
        String prefix = "RESULT " + step + " ";
        for (String line : c.stdout().split("\n")) {
            if (line.startsWith(prefix)) {
                if (line.startsWith(prefix + "OK")) {
                    return;
                }
                throw new AssertionError(line + "\n" + c.describe(120) + "\n" + broker.describe(100));
            }
        }
        throw new AssertionError(c.name() + " printed no RESULT for " + step + " (exit code " + exitCodes.get(lang)
            + ")\n" + c.describe(120) + "\n" + broker.describe(100));
    }
}
