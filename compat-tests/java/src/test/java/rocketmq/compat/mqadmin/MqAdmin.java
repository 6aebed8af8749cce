package rocketmq.compat.mqadmin;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.atomic.AtomicInteger;
import rocketmq.compat.harness.ChildProcess;
import rocketmq.compat.harness.JavaCommand;
import rocketmq.compat.runtime.RocketmqHome;
import rocketmq.compat.runtime.RuntimeClasspath;

/**
 * The official mqadmin ({@code MQAdminStartup} of rocketmq-tools) of one version and header encoding,
 * run in a child JVM per command with {@code -n <name server>} appended.
 */
public final class MqAdmin {
    private static final Duration TIMEOUT = Duration.ofSeconds(60);

    private final String version;
    private final String serializeType;
    private final String namesrvAddress;
    private final RocketmqHome home;
    private final String classpath;
    private final AtomicInteger runs = new AtomicInteger();

    public MqAdmin(String version, String serializeType, String namesrvAddress, Path dir) {
        this.version = version;
        this.serializeType = serializeType;
        this.namesrvAddress = namesrvAddress;
        this.home = RocketmqHome.create(dir);
        this.classpath = RuntimeClasspath.of("rocketmq-tools", version);
    }

    public String version() {
        return version;
    }

    /** Runs {@code mqadmin <command> <args...> -n <namesrv>} and returns what it printed. */
    public MqAdminRun run(String command, String... args) {
        List<String> all = new ArrayList<>();
        all.add(command);
        all.addAll(Arrays.asList(args));
        all.add("-n");
        all.add(namesrvAddress);
        String tag = String.format("%02d-%s", runs.incrementAndGet(), command);
        ChildProcess child = home.applyTo(ChildProcess.builder("mqadmin " + version + " " + command))
            .command(home.applyTo(JavaCommand.main("org.apache.rocketmq.tools.command.MQAdminStartup", classpath))
                .heapMb(32, 128)
                .shortLived()
                .property("rocketmq.serialize.type", serializeType)
                .args(all.toArray(new String[0]))
                .toList())
            .output(home.dir().resolve(tag + ".out"), home.dir().resolve(tag + ".err"))
            .start();
        int exit = child.awaitExit(TIMEOUT);
        return new MqAdminRun("mqadmin " + String.join(" ", all) + "  [tools " + version + ", " + serializeType + "]",
            exit, child.stdout(), child.stderr());
    }
}
