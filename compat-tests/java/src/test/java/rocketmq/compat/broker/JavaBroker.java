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
 * A Java broker (by default a master, brokerId 0; {@code brokerId}/{@code brokerRole} in the extra keys
 * make a slave) of a given version, from Maven Central, on 127.0.0.1 with a small store in a temp folder.
 * Besides listenPort it opens listenPort-2 (fast/VIP channel) and listenPort+1 (HA: always in 4.9, by
 * default in 5.x), so it is given four consecutive free ports. {@code brokerIP2}, the HA address a master
 * announces to its slaves, is 127.0.0.1.
 */
public final class JavaBroker implements AutoCloseable {
    private static final Duration LISTEN_TIMEOUT = Duration.ofSeconds(60);
    /** A 5.x broker takes about 13 s to shut down cleanly; a test fixture need not wait that long. */
    private static final Duration STOP_GRACE = Duration.ofSeconds(4);

    private final String version;
    private final Path dir;
    private final String clusterName;
    private final String brokerName;
    private final int port;
    private final RocketmqHome home;
    private final Path confFile;
    private final String namesrvAddress;
    private int starts;
    private ChildProcess process;

    private JavaBroker(String version, Path dir, String clusterName, String brokerName, int port, RocketmqHome home,
                       Path confFile, String namesrvAddress) {
        this.version = version;
        this.dir = dir;
        this.clusterName = clusterName;
        this.brokerName = brokerName;
        this.port = port;
        this.home = home;
        this.confFile = confFile;
        this.namesrvAddress = namesrvAddress;
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
        conf.put("brokerIP2", "127.0.0.1");
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
        JavaBroker broker = new JavaBroker(version, dir, clusterName, brokerName, port, home, confFile, namesrvAddress);
        broker.launch();
        return broker;
    }

    /**
     * Starts a Java broker with a broker.conf the caller wrote (for instance one our broker ran with before, on
     * the same store), listening on {@code port} (and port-2, port+1). Its store must be {@code dir/store}, as
     * {@link #storeDir()} says; {@code dir} also holds its output and is its home. Waits until it accepts connections.
     */
    public static JavaBroker startWithConf(String version, Path dir, Path confFile, String namesrvAddress,
                                           String clusterName, String brokerName, int port) {
        RocketmqHome home = RocketmqHome.create(dir);
        JavaBroker broker = new JavaBroker(version, dir, clusterName, brokerName, port, home, confFile, namesrvAddress);
        broker.launch();
        return broker;
    }

    /** Starts the process again (same conf, ports and store) after {@link #terminate} or {@link #kill()}. */
    public void restart() {
        if (process != null && process.isAlive()) {
            throw new IllegalStateException("Java broker " + brokerName + " is still running");
        }
        launch();
    }

    private void launch() {
        starts++;
        String cp = RuntimeClasspath.of("rocketmq-broker", version);
        ChildProcess child = home.applyTo(ChildProcess.builder("Java broker " + version + " " + brokerName
                + (starts > 1 ? " (start " + starts + ")" : "")))
            .command(home.applyTo(JavaCommand.main("org.apache.rocketmq.broker.BrokerStartup", cp))
                .heapMb(256, 512)
                // No TLS: in its default (permissive) mode the broker generates a self-signed RSA certificate at
                // start, which takes 20 s or more when three JVMs start at once on two cores. The clients here
                // never use TLS.
                .property("tls.server.mode", "disabled")
                .args("-c", confFile.toString(), "-n", namesrvAddress)
                .toList())
            .output(dir.resolve(starts > 1 ? "broker-" + starts + ".log" : "broker.log"))
            .stopGrace(STOP_GRACE)
            .start();
        process = child;
        try {
            Await.until("Java broker " + version + " listening on 127.0.0.1:" + port, LISTEN_TIMEOUT, () -> {
                if (!child.isAlive()) {
                    throw new AssertionError("Java broker " + version + " exited during start-up\n" + child.describe(80));
                }
                return TcpProbe.accepts(port);
            }, () -> child.describe(80));
        } catch (RuntimeException | Error e) {
            child.close();
            throw e;
        }
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

    /** listenPort + 1, where a master serves its slaves. */
    public int haPort() {
        return port + 1;
    }

    /** storePathRootDir. */
    public Path storeDir() {
        return dir.resolve("store");
    }

    public boolean isAlive() {
        return process != null && process.isAlive();
    }

    /** The process id of the running JVM (for jstack), or -1. */
    public long pid() {
        return process != null && process.isAlive() ? process.pid() : -1;
    }

    /** SIGTERM; fails unless it exits by itself within {@code grace} (a 5.x broker needs about 13 s). */
    public int terminate(Duration grace) {
        return process.terminate(grace);
    }

    /** SIGKILL. What it wrote to its mapped files stays in the page cache, so the files can still be read. */
    public void kill() {
        process.kill();
    }

    public String describe(int lines) {
        // The broker's own logs say why a replication or store step failed (store.log holds the HA service's).
        StringBuilder sb = new StringBuilder(process.describe(lines));
        for (String log : new String[] {"store.log", "broker.log"}) {
            Path file = home.dir().resolve("logs/rocketmqlogs").resolve(log);
            try {
                java.util.List<String> all = java.nio.file.Files.readAllLines(file);
                sb.append("-- last ").append(lines).append(" lines of ").append(file).append(" --\n");
                all.subList(Math.max(0, all.size() - lines), all.size()).forEach(l -> sb.append(l).append('\n'));
            } catch (java.io.IOException | java.io.UncheckedIOException e) {
                // No such log (yet): nothing to add.
            }
        }
        return sb.toString();
    }

    @Override
    public void close() {
        if (process != null) {
            process.close();
        }
    }
}
