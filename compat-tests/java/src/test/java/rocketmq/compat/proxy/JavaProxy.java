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
import rocketmq.compat.harness.JavaCommand;
import rocketmq.compat.harness.TcpProbe;
import rocketmq.compat.runtime.RocketmqHome;
import rocketmq.compat.runtime.RuntimeClasspath;

/**
 * Java's RocketMQ proxy ({@code org.apache.rocketmq.proxy.ProxyStartup} of rocketmq-proxy) in CLUSTER mode in a
 * child JVM: its gRPC port in front of one name server and the brokers of one cluster. Its home (ROCKETMQ_HOME,
 * user.home: rmq-proxy.json, logs) is {@code dir}. The proxy binds its two ports on every address (Java offers no
 * bind address); the clients reach it on 127.0.0.1. No TLS ({@code tls.server.mode=disabled}): the gRPC clients
 * connect in plain text.
 */
public final class JavaProxy implements AutoCloseable {
    private static final Duration LISTEN_TIMEOUT = Duration.ofSeconds(90);

    private final Path dir;
    private final int grpcPort;
    private final ChildProcess process;

    private JavaProxy(Path dir, int grpcPort, ChildProcess process) {
        this.dir = dir;
        this.grpcPort = grpcPort;
        this.process = process;
    }

    /**
     * Starts the proxy for {@code clusterName}'s brokers registered with {@code namesrvAddress}, {@code extra} keys
     * added to (or replacing those of) rmq-proxy.json, and waits until its gRPC port accepts connections.
     */
    public static JavaProxy start(String version, Path dir, String namesrvAddress, String clusterName,
                                  Map<String, Object> extra) {
        RocketmqHome home = RocketmqHome.create(dir);
        int grpcPort = FreePorts.one();
        int remotingPort = FreePorts.one();
        Map<String, Object> conf = new LinkedHashMap<>();
        conf.put("rocketMQClusterName", clusterName);
        conf.put("proxyName", "proxy-" + clusterName);
        conf.put("proxyMode", "cluster");
        conf.put("namesrvAddr", namesrvAddress);
        conf.put("grpcServerPort", grpcPort);
        conf.put("remotingListenPort", remotingPort);
        conf.put("localServeAddr", "127.0.0.1");
        conf.put("grpcShutdownTimeSeconds", 1);
        conf.put("enablePrintJstack", false);
        conf.putAll(extra);
        Path confFile = dir.resolve("rmq-proxy.json");
        try {
            Files.writeString(confFile, json(conf));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        String cp = RuntimeClasspath.of("rocketmq-proxy", version);
        ChildProcess child = home.applyTo(ChildProcess.builder("Java proxy " + version + " " + clusterName))
            .command(home.applyTo(JavaCommand.main("org.apache.rocketmq.proxy.ProxyStartup", cp))
                .heapMb(128, 512)
                .property("tls.server.mode", "disabled")
                .args("-pc", confFile.toString(), "-pm", "cluster", "-n", namesrvAddress)
                .toList())
            .env("RMQ_PROXY_HOME", dir.toString())
            .output(dir.resolve("proxy.out"))
            .stopGrace(Duration.ofSeconds(5))
            .start();
        JavaProxy proxy = new JavaProxy(dir, grpcPort, child);
        try {
            Await.until("Java proxy listening on 127.0.0.1:" + grpcPort, LISTEN_TIMEOUT, () -> {
                if (!child.isAlive()) {
                    throw new AssertionError("Java proxy exited during start-up\n" + proxy.describe(80));
                }
                return TcpProbe.accepts(grpcPort) && child.stdout().contains("rocketmq-proxy startup successfully");
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

    public boolean isAlive() {
        return process.isAlive();
    }

    /** The process output and the last lines of the proxy's own log. */
    public String describe(int lines) {
        StringBuilder sb = new StringBuilder(process.describe(lines));
        Path file = dir.resolve("logs/rocketmqlogs/proxy.log");
        try {
            List<String> all = Files.readAllLines(file);
            sb.append("-- last ").append(lines).append(" lines of ").append(file).append(" --\n");
            all.subList(Math.max(0, all.size() - lines), all.size()).forEach(l -> sb.append(l).append('\n'));
        } catch (IOException | UncheckedIOException e) {
            // no log yet
        }
        return sb.toString();
    }

    @Override
    public void close() {
        process.close();
    }
}
