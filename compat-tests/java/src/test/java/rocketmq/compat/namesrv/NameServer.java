package rocketmq.compat.namesrv;

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
import rocketmq.compat.harness.PropertiesFile;
import rocketmq.compat.harness.TcpProbe;
import rocketmq.compat.runtime.CompatDirs;
import rocketmq.compat.runtime.RocketmqHome;
import rocketmq.compat.runtime.RuntimeClasspath;
import rocketmq.compat.runtime.Versions;

/**
 * The name server under test, on 127.0.0.1 and a free port, with its files in a temp folder: our
 * {@code mqnamesrv} from {@code rmq.bin.dir}, or with {@code -Drmq.namesrv=java} the Java one (5.x),
 * both started with {@code -c <properties file>}.
 */
public final class NameServer implements AutoCloseable {
    /** A Java name server's JVM start took over 30 s once under CI's parallel lanes on two cores. */
    private static final Duration READY_TIMEOUT = Duration.ofSeconds(60);

    private final String kind;
    private final int port;
    private final Path configFile;
    private final Path kvConfigPath;
    private final ChildProcess process;

    private NameServer(String kind, int port, Path configFile, Path kvConfigPath, ChildProcess process) {
        this.kind = kind;
        this.port = port;
        this.configFile = configFile;
        this.kvConfigPath = kvConfigPath;
        this.process = process;
    }

    /** "java" or "rust", from {@code -Drmq.namesrv} (default rust). */
    public static String selectedKind() {
        String kind = System.getProperty("rmq.namesrv", "rust").trim().toLowerCase();
        if (kind.isEmpty()) {
            return "rust";
        }
        if (!kind.equals("rust") && !kind.equals("java")) {
            throw new IllegalStateException("-Drmq.namesrv must be rust or java, not " + kind);
        }
        return kind;
    }

    /** Starts the selected name server in {@code dir} and waits until it accepts TCP connections. */
    public static NameServer start(Path dir) {
        return start(dir, selectedKind());
    }

    /** Starts the given name server ("rust" or "java", whatever -Drmq.namesrv says) in {@code dir}. */
    public static NameServer start(Path dir, String kind) {
        return start(dir, kind, Map.of());
    }

    /** As {@link #start(Path, String)}, with {@code extra} keys added to (or replacing those of) its config file. */
    public static NameServer start(Path dir, String kind, Map<String, String> extra) {
        if (!kind.equals("rust") && !kind.equals("java")) {
            throw new IllegalArgumentException("name server kind must be rust or java, not " + kind);
        }
        RocketmqHome home = RocketmqHome.create(dir);
        int port = FreePorts.one();
        Path kvConfig = dir.resolve("kvConfig.json");
        Map<String, String> config = new LinkedHashMap<>();
        config.put("listenPort", Integer.toString(port));
        config.put("bindAddress", "127.0.0.1");
        config.put("kvConfigPath", kvConfig.toString());
        config.put("configStorePath", dir.resolve("namesrv.properties").toString());
        config.putAll(extra);
        Path configFile = PropertiesFile.write(dir.resolve("namesrv.conf"), config);

        List<String> command = kind.equals("java") ? javaCommand(home, configFile) : rustCommand(configFile);
        ChildProcess process = home.applyTo(ChildProcess.builder(kind + " name server"))
            .command(command)
            .output(dir.resolve("namesrv.log"))
            .start();
        NameServer ns = new NameServer(kind, port, configFile, kvConfig, process);
        try {
            Await.until(kind + " name server accepting connections on 127.0.0.1:" + port, READY_TIMEOUT, () -> {
                if (!process.isAlive()) {
                    throw new AssertionError("the " + kind + " name server exited during start-up\n" + process.describe(60));
                }
                return TcpProbe.accepts(port);
            }, () -> process.describe(60));
        } catch (RuntimeException | Error e) {
            ns.close();
            throw e;
        }
        return ns;
    }

    private static List<String> rustCommand(Path configFile) {
        Path binary = CompatDirs.binDir().resolve("mqnamesrv");
        if (!Files.isRegularFile(binary) || !Files.isExecutable(binary)) {
            throw new IllegalStateException("our name server binary is missing: " + binary
                + " (build it with cargo, point -Drmq.bin.dir at its folder, or use -Drmq.namesrv=java)");
        }
        return List.of(binary.toString(), "-c", configFile.toString());
    }

    private static List<String> javaCommand(RocketmqHome home, Path configFile) {
        String cp = RuntimeClasspath.of("rocketmq-namesrv", Versions.JAVA_5);
        return home.applyTo(JavaCommand.main("org.apache.rocketmq.namesrv.NamesrvStartup", cp))
            .heapMb(128, 256)
            .args("-c", configFile.toString())
            .toList();
    }

    /** "rust" or "java". */
    public String kind() {
        return kind;
    }

    /** {@code 127.0.0.1:<port>}, the form brokers and clients are given. */
    public String address() {
        return "127.0.0.1:" + port;
    }

    public Path configFile() {
        return configFile;
    }

    public Path kvConfigPath() {
        return kvConfigPath;
    }

    public String describe(int lines) {
        return process.describe(lines);
    }

    @Override
    public void close() {
        process.close();
    }
}
