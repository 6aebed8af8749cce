package rocketmq.compat.broker;

import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.ChildProcess;
import rocketmq.compat.harness.FreePorts;
import rocketmq.compat.harness.JavaCommand;
import rocketmq.compat.harness.PropertiesFile;
import rocketmq.compat.harness.TcpProbe;
import rocketmq.compat.runtime.RocketmqHome;
import rocketmq.compat.runtime.RuntimeClasspath;

/**
 * A Java broker (master, brokerId 0) of a given version, from Maven Central, on 127.0.0.1 with a small
 * store in a temp folder. Besides listenPort it opens listenPort-2 (fast/VIP channel) and listenPort+1
 * (HA), so it is given four consecutive free ports.
 */
public final class JavaBroker implements AutoCloseable {
    private static final Duration LISTEN_TIMEOUT = Duration.ofSeconds(60);
    /** A 5.x broker takes about 13 s to shut down cleanly; a test fixture need not wait that long. */
    private static final Duration STOP_GRACE = Duration.ofSeconds(4);

    private final String version;
    private final String clusterName;
    private final String brokerName;
    private final int port;
    private final ChildProcess process;

    private JavaBroker(String version, String clusterName, String brokerName, int port, ChildProcess process) {
        this.version = version;
        this.clusterName = clusterName;
        this.brokerName = brokerName;
        this.port = port;
        this.process = process;
    }

    /** Starts the broker and waits until it accepts connections (not until it registered). */
    public static JavaBroker start(String version, Path dir, String namesrvAddress, String clusterName,
                                   String brokerName) {
        return start(version, dir, namesrvAddress, clusterName, brokerName, Map.of());
    }

    /** As {@link #start(String, Path, String, String, String)}, with {@code extra} keys added to (or replacing those of) broker.conf. */
    public static JavaBroker start(String version, Path dir, String namesrvAddress, String clusterName,
                                   String brokerName, Map<String, String> extra) {
        RocketmqHome home = RocketmqHome.create(dir);
        int port = FreePorts.block(4) + 2;
        Map<String, String> conf = new LinkedHashMap<>();
        conf.put("brokerClusterName", clusterName);
        conf.put("brokerName", brokerName);
        conf.put("brokerId", "0");
        conf.put("brokerIP1", "127.0.0.1");
        conf.put("listenPort", Integer.toString(port));
        conf.put("namesrvAddr", namesrvAddress);
        conf.put("storePathRootDir", dir.resolve("store").toString());
        conf.put("storePathCommitLog", dir.resolve("store/commitlog").toString());
        conf.put("autoCreateTopicEnable", "true");
        conf.put("mappedFileSizeCommitLog", Integer.toString(64 * 1024 * 1024));
        conf.put("warmMapedFileEnable", "false");
        conf.put("flushDiskType", "ASYNC_FLUSH");
        if (!version.startsWith("4.")) {
            conf.put("bindAddress", "127.0.0.1");
            conf.put("timerWheelEnable", "false");
        }
        conf.putAll(extra);
        Path confFile = PropertiesFile.write(dir.resolve("broker.conf"), conf);

        String cp = RuntimeClasspath.of("rocketmq-broker", version);
        ChildProcess process = home.applyTo(ChildProcess.builder("Java broker " + version))
            .command(home.applyTo(JavaCommand.main("org.apache.rocketmq.broker.BrokerStartup", cp))
                .heapMb(256, 512)
                .args("-c", confFile.toString(), "-n", namesrvAddress)
                .toList())
            .output(dir.resolve("broker.log"))
            .stopGrace(STOP_GRACE)
            .start();
        JavaBroker broker = new JavaBroker(version, clusterName, brokerName, port, process);
        try {
            Await.until("Java broker " + version + " listening on 127.0.0.1:" + port, LISTEN_TIMEOUT, () -> {
                if (!process.isAlive()) {
                    throw new AssertionError("Java broker " + version + " exited during start-up\n" + process.describe(80));
                }
                return TcpProbe.accepts(port);
            }, () -> process.describe(80));
        } catch (RuntimeException | Error e) {
            broker.close();
            throw e;
        }
        return broker;
    }

    public String version() {
        return version;
    }

    public String clusterName() {
        return clusterName;
    }

    public String brokerName() {
        return brokerName;
    }

    /** {@code 127.0.0.1:<listenPort>}, the address it registers. */
    public String address() {
        return "127.0.0.1:" + port;
    }

    public String describe(int lines) {
        return process.describe(lines);
    }

    @Override
    public void close() {
        process.close();
    }
}
