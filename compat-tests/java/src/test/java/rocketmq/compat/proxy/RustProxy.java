package rocketmq.compat.proxy;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.ChildProcess;
import rocketmq.compat.harness.FreePorts;
import rocketmq.compat.harness.TcpProbe;
import rocketmq.compat.runtime.CompatDirs;

/**
 * Our gRPC proxy in CLUSTER mode, {@code mqproxy -pc rmq-proxy.json -n NAMESRV} from {@code rmq.bin.dir}: its gRPC
 * port (plaintext and TLS on one port) and its remoting port ({@code remotingListenPort}: remoting and gRPC clients)
 * in front of the brokers of one cluster that a name server knows. Its rmq-proxy.json and output are in {@code dir}.
 */
public final class RustProxy implements AutoCloseable {
    private static final Duration LISTEN_TIMEOUT = Duration.ofSeconds(30);

    private final int grpcPort;
    private final int remotingPort;
    private final ChildProcess process;

    private RustProxy(int grpcPort, int remotingPort, ChildProcess process) {
        this.grpcPort = grpcPort;
        this.remotingPort = remotingPort;
        this.process = process;
    }

    /**
     * Starts the proxy for {@code clusterName}'s brokers registered with {@code namesrvAddress}, {@code extra} keys
     * added to rmq-proxy.json (Java's keys; ours ignores those it does not read), and waits until it serves.
     */
    public static RustProxy start(Path dir, String namesrvAddress, String clusterName, Map<String, Object> extra) {
        Path binary = CompatDirs.binDir().resolve("mqproxy");
        if (!Files.isRegularFile(binary) || !Files.isExecutable(binary)) {
            throw new IllegalStateException("our proxy binary is missing: " + binary
                + " (cargo build --workspace --bins, or point -Drmq.bin.dir at its folder)");
        }
        int grpcPort = FreePorts.one();
        int remotingPort = FreePorts.one();
        Map<String, Object> conf = new LinkedHashMap<>();
        conf.put("rocketMQClusterName", clusterName);
        conf.put("proxyMode", "cluster");
        conf.put("grpcServerPort", grpcPort);
        conf.put("remotingListenPort", remotingPort);
        conf.putAll(extra);
        Path confFile = dir.resolve("rmq-proxy.json");
        try {
            Files.createDirectories(dir);
            Files.writeString(confFile, json(conf));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        ChildProcess child = ChildProcess.builder("our proxy " + clusterName)
            .command(List.of(binary.toString(), "-pc", confFile.toString(), "-n", namesrvAddress))
            .env("RUST_LOG", "info")
            .env("HOME", dir.toString())
            .directory(dir)
            .output(dir.resolve("proxy.out"), dir.resolve("proxy.err"))
            .stopGrace(Duration.ofSeconds(5))
            .start();
        RustProxy proxy = new RustProxy(grpcPort, remotingPort, child);
        try {
            Await.until("our proxy serving on 127.0.0.1:" + grpcPort, LISTEN_TIMEOUT, () -> {
                if (!child.isAlive()) {
                    throw new AssertionError("our proxy exited during start-up\n" + proxy.describe(80));
                }
                return child.stdout().contains("rocketmq-proxy startup successfully") && TcpProbe.accepts(grpcPort)
                    && TcpProbe.accepts(remotingPort);
            }, () -> proxy.describe(80));
        } catch (RuntimeException | Error e) {
            child.close();
            throw e;
        }
        return proxy;
    }

    private static String json(Map<String, Object> conf) {
        StringBuilder sb = new StringBuilder("{\n");
        int i = 0;
        for (Map.Entry<String, Object> e : conf.entrySet()) {
            Object v = e.getValue();
            String value = v instanceof String s ? "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"" : String.valueOf(v);
            sb.append("  \"").append(e.getKey()).append("\": ").append(value).append(++i < conf.size() ? ",\n" : "\n");
        }
        return sb.append("}\n").toString();
    }

    /** {@code 127.0.0.1:<grpcServerPort>}, the clients' endpoint. */
    public String endpoint() {
        return "127.0.0.1:" + grpcPort;
    }

    /** {@code 127.0.0.1:<remotingListenPort>}: remoting clients take it for their name server. */
    public String remotingEndpoint() {
        return "127.0.0.1:" + remotingPort;
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    /** Its output (its log goes to stderr). */
    public String describe(int lines) {
        return process.describe(lines);
    }

    @Override
    public void close() {
        process.close();
    }
}
