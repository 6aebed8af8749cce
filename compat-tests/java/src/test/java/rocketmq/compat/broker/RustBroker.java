package rocketmq.compat.broker;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.stream.Stream;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.ChildProcess;
import rocketmq.compat.harness.FreePorts;
import rocketmq.compat.harness.PropertiesFile;
import rocketmq.compat.harness.TcpProbe;
import rocketmq.compat.runtime.CompatDirs;
import rocketmq.compat.runtime.RocketmqHome;

/**
 * Our broker, {@code mqbroker -c broker.conf} from {@code rmq.bin.dir}: a master (brokerId 0) on
 * 127.0.0.1 and a free port, its store, config files and output in a temp folder that is also its HOME.
 * It can be stopped (SIGTERM), killed (SIGKILL) and started again on the same port and store.
 * Four consecutive ports are reserved, as for a Java broker: listenPort-2 (Java's fast port), listenPort-1,
 * listenPort and listenPort+1 (the HA port Java derives from it).
 */
public final class RustBroker implements AutoCloseable {
    private static final Duration READY_TIMEOUT = Duration.ofSeconds(30);
    /** It unregisters and flushes in about a second; 10 s before SIGKILL. */
    private static final Duration STOP_GRACE = Duration.ofSeconds(10);

    private final Path dir;
    private final Path confFile;
    private final String clusterName;
    private final String brokerName;
    private final int port;
    private final RocketmqHome home;
    /** Arguments after {@code -c FILE} (e.g. {@code --enable-proxy -pc rmq-proxy.json}). */
    private List<String> extraArgs = List.of();
    private int starts;
    private ChildProcess process;

    private RustBroker(Path dir, Path confFile, String clusterName, String brokerName, int port, RocketmqHome home) {
        this.dir = dir;
        this.confFile = confFile;
        this.clusterName = clusterName;
        this.brokerName = brokerName;
        this.port = port;
        this.home = home;
    }

    /**
     * Writes broker.conf and starts the broker; returns once it printed "boot success" and accepts TCP.
     * {@code namesrvAddresses} is Java's list form, {@code a:p;b:q}.
     */
    public static RustBroker start(Path dir, String namesrvAddresses, String clusterName, String brokerName) {
        return start(dir, namesrvAddresses, clusterName, brokerName, Map.of());
    }

    /** As {@link #start(Path, String, String, String)}, with {@code extra} keys added to (or replacing those of) broker.conf. */
    public static RustBroker start(Path dir, String namesrvAddresses, String clusterName, String brokerName,
                                   Map<String, String> extra) {
        return start(dir, namesrvAddresses, clusterName, brokerName, extra, List.of());
    }

    /** As {@link #start(Path, String, String, String, Map)}, with {@code args} after {@code -c FILE}. */
    public static RustBroker start(Path dir, String namesrvAddresses, String clusterName, String brokerName,
                                   Map<String, String> extra, List<String> args) {
        Path binary = binary();
        RocketmqHome home = RocketmqHome.create(dir);
        int port = FreePorts.block(4) + 2;
        Map<String, String> conf = new LinkedHashMap<>();
        conf.put("brokerClusterName", clusterName);
        conf.put("brokerName", brokerName);
        conf.put("brokerId", "0");
        conf.put("brokerIP1", "127.0.0.1");
        conf.put("brokerIP2", "127.0.0.1");
        conf.put("listenPort", Integer.toString(port));
        conf.put("bindAddress", "127.0.0.1");
        conf.put("namesrvAddr", namesrvAddresses);
        conf.put("storePathRootDir", dir.resolve("store").toString());
        conf.put("mappedFileSizeCommitLog", Integer.toString(64 * 1024 * 1024));
        conf.put("autoCreateTopicEnable", "true");
        conf.putAll(extra);
        Path confFile = PropertiesFile.write(dir.resolve("broker.conf"), conf);
        RustBroker broker = new RustBroker(dir, confFile, clusterName, brokerName, port, home);
        broker.extraArgs = List.copyOf(args);
        broker.launch(binary);
        return broker;
    }

    /**
     * Starts our broker with a broker.conf the caller wrote (for instance one a Java broker ran with before, on
     * the same store), listening on {@code port}. Its store must be {@code dir/store}, as {@link #storeDir()}
     * says; {@code dir} also holds its output and is its HOME. Returns once it printed "boot success" and
     * accepts TCP.
     */
    public static RustBroker startWithConf(Path dir, Path confFile, String clusterName, String brokerName, int port) {
        Path binary = binary();
        RocketmqHome home = RocketmqHome.create(dir);
        RustBroker broker = new RustBroker(dir, confFile, clusterName, brokerName, port, home);
        broker.launch(binary);
        return broker;
    }

    private static Path binary() {
        Path binary = CompatDirs.binDir().resolve("mqbroker");
        if (!Files.isRegularFile(binary) || !Files.isExecutable(binary)) {
            throw new IllegalStateException("our broker binary is missing: " + binary
                + " (cargo build --workspace --bins, or point -Drmq.bin.dir at its folder)");
        }
        return binary;
    }

    /** Starts the process again (same conf, port and store) after {@link #terminate()} or {@link #kill()}. */
    public void restart() {
        if (process != null && process.isAlive()) {
            throw new IllegalStateException("broker " + brokerName + " is still running");
        }
        launch(binary());
    }

    private void launch(Path binary) {
        starts++;
        Path out = dir.resolve("broker-" + starts + ".out");
        ChildProcess child = home.applyTo(ChildProcess.builder("our broker " + brokerName + " (start " + starts + ")"))
            .command(Stream.concat(Stream.of(binary.toString(), "-c", confFile.toString()),
                extraArgs.stream()).toList())
            .env("RUST_LOG", "info")
            .output(out, dir.resolve("broker-" + starts + ".err"))
            .stopGrace(STOP_GRACE)
            .start();
        process = child;
        try {
            Await.until("our broker " + brokerName + " booted and listening on 127.0.0.1:" + port, READY_TIMEOUT, () -> {
                if (!child.isAlive()) {
                    throw new AssertionError("our broker exited during start-up\n" + child.describe(80));
                }
                return child.stdout().contains("boot success") && TcpProbe.accepts(port);
            }, () -> child.describe(80));
        } catch (RuntimeException | Error e) {
            child.close();
            throw e;
        }
    }

    /** SIGTERM; fails unless it exits by itself within 10 s. Returns its exit code. */
    public int terminate() {
        return process.terminate();
    }

    /** SIGKILL: a crash, nothing flushed or unregistered. */
    public void kill() {
        process.kill();
    }

    public boolean isAlive() {
        return process != null && process.isAlive();
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

    /** listenPort. */
    public int port() {
        return port;
    }

    /** storePathRootDir. */
    public Path storeDir() {
        return dir.resolve("store");
    }

    /** Everything the broker has written so far (its log goes to stdout). */
    public String output() {
        return process == null ? "" : process.stdout() + process.stderr();
    }

    public String describe(int lines) {
        return process == null ? "(our broker never started)" : process.describe(lines);
    }

    @Override
    public void close() {
        if (process != null) {
            process.close();
        }
    }
}
