package rocketmq.compat.client;

import java.io.File;
import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.Map;
import rocketmq.compat.harness.ChildProcess;
import rocketmq.compat.harness.JavaCommand;
import rocketmq.compat.runtime.CompatDirs;
import rocketmq.compat.runtime.RocketmqHome;
import rocketmq.compat.runtime.RuntimeClasspath;

/**
 * Runs {@code rocketmq.compat.driver.ProduceConsumeDriver} in a child JVM whose classpath is this
 * project's classes plus one official client version, with one header encoding, and reads its
 * {@code RESULT} line.
 */
public final class ProduceConsumeRun {
    private static final Duration TIMEOUT = Duration.ofSeconds(240);
    private static final int CONSUME_TIMEOUT_SECONDS = 90;

    private final int exitCode;
    private final Map<String, String> result;
    private final String report;
    private final String summary;

    private ProduceConsumeRun(int exitCode, Map<String, String> result, String report, String summary) {
        this.exitCode = exitCode;
        this.result = result;
        this.report = report;
        this.summary = summary;
    }

    public static ProduceConsumeRun run(String clientVersion, String serializeType, String namesrvAddress,
                                        String topic, int count, Path dir) {
        RocketmqHome home = RocketmqHome.create(dir);
        String cp = CompatDirs.driverClasses() + File.pathSeparator + RuntimeClasspath.of("rocketmq-client", clientVersion);
        ChildProcess child = home.applyTo(ChildProcess.builder("client " + clientVersion + " " + serializeType + " driver"))
            .command(home.applyTo(JavaCommand.main("rocketmq.compat.driver.ProduceConsumeDriver", cp))
                .heapMb(64, 256)
                .property("rocketmq.serialize.type", serializeType)
                .args(namesrvAddress, topic, Integer.toString(count), Integer.toString(CONSUME_TIMEOUT_SECONDS))
                .toList())
            .output(dir.resolve("driver.log"))
            .start();
        int exit = child.awaitExit(TIMEOUT);
        String output = child.stdout();
        String summary = output.lines().filter(l -> l.startsWith("CLIENT ") || l.startsWith("RESULT "))
            .reduce((a, b) -> a + " | " + b).orElse("(no RESULT line)");
        return new ProduceConsumeRun(exit, parseResult(output), child.describe(40), summary);
    }

    private static Map<String, String> parseResult(String output) {
        Map<String, String> fields = new HashMap<>();
        for (String line : output.split("\n")) {
            if (line.startsWith("RESULT ")) {
                for (String token : line.substring(7).split(" ")) {
                    int eq = token.indexOf('=');
                    if (eq > 0) {
                        fields.putIfAbsent(token.substring(0, eq), token.substring(eq + 1));
                    }
                }
            }
        }
        return fields;
    }

    public int exitCode() {
        return exitCode;
    }

    /** A field of the RESULT line (status, sent, received, duplicates, bad), or null if there was none. */
    public String field(String name) {
        return result.get(name);
    }

    /** The driver's CLIENT and RESULT lines. */
    public String summary() {
        return summary;
    }

    /** The driver's command, exit code and output tail, for failure messages. */
    public String report() {
        return report;
    }
}
