package rocketmq.compat.dledger;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.ChildProcess;
import rocketmq.compat.harness.TcpProbe;
import rocketmq.compat.runtime.CompatDirs;

/**
 * One member of a DLedger group on 127.0.0.1: ours ({@code dledger server} from {@code rmq.bin.dir}) or Java's
 * (DLedger 0.3.1.2 through {@code compat-tests/dledger-node/run.sh server}), both with the same options
 * ({@code -g -i -p -s} and kebab-cased DLedgerConfig keys). It can be stopped (SIGTERM), killed (SIGKILL) and
 * started again on the same port and storeBaseDir, by either implementation.
 */
final class DLedgerMember implements AutoCloseable {
    /** A Java member compiles DLedgerNode on its first start and starts a JVM: allow for a busy machine. */
    private static final Duration READY_TIMEOUT = Duration.ofSeconds(60);
    private static final Duration STOP_GRACE = Duration.ofSeconds(20);
    /** Members are small: a short heap, the serial collector and C1 only keep 3 JVMs light on 2 cores. */
    static final String MEMBER_JAVA_OPTS = "-Xmx256m -XX:+UseSerialGC -XX:TieredStopAtLevel=1";

    enum Kind {
        JAVA, OURS;

        String label() {
            return this == JAVA ? "Java" : "our";
        }
    }

    private final String group;
    private final String id;
    private final int port;
    private final String peers;
    private final Path storeBaseDir;
    private final Path logDir;
    private final List<String> options;
    private Kind kind;
    private int starts;
    private ChildProcess process;

    DLedgerMember(String group, String id, int port, String peers, Path dir, List<String> options, Kind kind) {
        this.group = group;
        this.id = id;
        this.port = port;
        this.peers = peers;
        this.storeBaseDir = dir.resolve("store");
        this.logDir = dir;
        this.options = options;
        this.kind = kind;
    }

    static Path ourBinary() {
        Path binary = CompatDirs.binDir().resolve("dledger");
        if (!Files.isRegularFile(binary) || !Files.isExecutable(binary)) {
            throw new IllegalStateException("our dledger binary is missing: " + binary
                + " (cargo build --workspace --bins, or point -Drmq.bin.dir at its folder)");
        }
        return binary;
    }

    static Path javaRunScript() {
        Path script = CompatDirs.compatDir().resolve("dledger-node/run.sh");
        if (!Files.isRegularFile(script)) {
            throw new IllegalStateException("the Java DLedger runner is missing: " + script);
        }
        return script;
    }

    /** Starts the member as {@code as} on its port and storeBaseDir; returns once it serves. */
    void start(Kind as) {
        if (process != null && process.isAlive()) {
            throw new IllegalStateException(label() + " is still running");
        }
        kind = as;
        starts++;
        List<String> cmd = new ArrayList<>();
        if (kind == Kind.OURS) {
            cmd.add(ourBinary().toString());
        } else {
            cmd.add("bash");
            cmd.add(javaRunScript().toString());
        }
        cmd.addAll(List.of("server", "-g", group, "-i", id, "-p", peers, "-s", storeBaseDir.toString()));
        cmd.addAll(options);
        String name = label() + " (start " + starts + ")";
        Path out = logDir.resolve(id + "-" + starts + "-" + kind.name().toLowerCase() + ".out");
        ChildProcess child = ChildProcess.builder(name)
            .command(cmd)
            .directory(logDir)
            .env("RUST_LOG", "info")
            .env("JAVA_OPTS", MEMBER_JAVA_OPTS)
            .output(out)
            .stopGrace(STOP_GRACE)
            .start();
        process = child;
        try {
            // Java prints "DLedger member [g, id] started", ours "DLedger member [g, id] listening on ...".
            String banner = "DLedger member [" + group + ", " + id + "]";
            Await.until(name + " serving on 127.0.0.1:" + port, READY_TIMEOUT, () -> {
                if (!child.isAlive()) {
                    throw new AssertionError(name + " exited during start-up\n" + child.describe(60));
                }
                return child.stdout().contains(banner) && TcpProbe.accepts(port);
            }, () -> child.describe(60));
        } catch (RuntimeException | Error e) {
            child.close();
            throw e;
        }
    }

    /** SIGTERM: both flush and write their checkpoint. Ours must exit 0 (a JVM ended by SIGTERM exits 143). */
    void stop() {
        if (process == null || !process.isAlive()) {
            return;
        }
        int code = process.terminate();
        if (kind == Kind.OURS && code != 0) {
            throw new AssertionError(label() + " exited with " + code + " after SIGTERM\n" + process.describe(40));
        }
    }

    /** SIGKILL (Process.destroyForcibly): a crash; what it wrote to its mappings stays in the page cache. */
    void kill() {
        process.kill();
    }

    String id() {
        return id;
    }

    Kind kind() {
        return kind;
    }

    int port() {
        return port;
    }

    /** {@code <storeBaseDir>/dledger-<id>}: checkpoint, currterm, data/, index/. */
    Path nodeDir() {
        return storeBaseDir.resolve("dledger-" + id);
    }

    boolean isAlive() {
        return process != null && process.isAlive();
    }

    String label() {
        return kind.label() + " member " + id;
    }

    String describe(int lines) {
        return process == null ? "(" + label() + " never started)" : process.describe(lines);
    }

    @Override
    public void close() {
        if (process != null) {
            process.close();
        }
    }

    @Override
    public String toString() {
        return label() + " at 127.0.0.1:" + port;
    }
}
