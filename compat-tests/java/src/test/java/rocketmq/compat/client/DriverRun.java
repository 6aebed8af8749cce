package rocketmq.compat.client;

import java.io.File;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import rocketmq.compat.harness.ChildProcess;
import rocketmq.compat.harness.JavaCommand;
import rocketmq.compat.runtime.CompatDirs;
import rocketmq.compat.runtime.RocketmqHome;
import rocketmq.compat.runtime.RuntimeClasspath;

/**
 * Runs a driver main class of this project ({@code FeatureDriver}, {@code AdminQueryDriver}) in a child JVM
 * whose classpath is this project's classes plus one official artifact's (rocketmq-client or rocketmq-tools
 * of a version), with one header encoding, and reads its {@code RESULT step=... status=...} lines.
 */
public final class DriverRun {
    private static final Duration TIMEOUT = Duration.ofSeconds(240);

    private final String name;
    private final int exitCode;
    private final String output;
    private final Map<String, Map<String, String>> results;
    private final String report;

    private DriverRun(String name, int exitCode, String output, Map<String, Map<String, String>> results, String report) {
        this.name = name;
        this.exitCode = exitCode;
        this.output = output;
        this.results = results;
        this.report = report;
    }

    /** Runs {@code rocketmq.compat.driver.<mainClass>} with {@code args}; returns when it exited. */
    public static DriverRun run(String mainClass, String artifact, String version, String serializeType, Path dir,
                                String... args) {
        return start(mainClass, artifact, version, serializeType, dir, args).await(TIMEOUT);
    }

    /** Starts the driver and returns at once; read its output while it runs, then {@link Running#await}. */
    public static Running start(String mainClass, String artifact, String version, String serializeType, Path dir,
                                String... args) {
        RocketmqHome home = RocketmqHome.create(dir);
        String cp = CompatDirs.driverClasses() + File.pathSeparator + RuntimeClasspath.of(artifact, version);
        String name = mainClass + " " + artifact + " " + version + " " + serializeType;
        ChildProcess child = home.applyTo(ChildProcess.builder(name))
            .command(home.applyTo(JavaCommand.main("rocketmq.compat.driver." + mainClass, cp))
                .heapMb(64, 384)
                .property("rocketmq.serialize.type", serializeType)
                .property("rocketmq.client.logRoot", dir.resolve("logs").toString())
                .args(args)
                .toList())
            .output(dir.resolve("driver.log"))
            .start();
        return new Running(name, child);
    }

    /** A driver still running. */
    public static final class Running implements AutoCloseable {
        private final String name;
        private final ChildProcess child;

        private Running(String name, ChildProcess child) {
            this.name = name;
            this.child = child;
        }

        /** The words after {@code prefix} of every output line so far that starts with it (whole lines only). */
        public List<String[]> lines(String prefix) {
            String out = child.stdout();
            int end = out.lastIndexOf('\n');
            return DriverRun.lines(end < 0 ? "" : out.substring(0, end + 1), prefix);
        }

        public boolean isAlive() {
            return child.isAlive();
        }

        public String describe(int lines) {
            return child.describe(lines);
        }

        /** Waits until it exits (killed and failed after {@code timeout}). */
        public DriverRun await(Duration timeout) {
            int exit = child.awaitExit(timeout);
            String output = child.stdout();
            return new DriverRun(name, exit, output, parse(output), child.describe(60));
        }

        @Override
        public void close() {
            child.close();
        }
    }

    static Map<String, Map<String, String>> parse(String output) {
        Map<String, Map<String, String>> results = new LinkedHashMap<>();
        for (String line : output.split("\n")) {
            if (!line.startsWith("RESULT ")) {
                continue;
            }
            String rest = line.substring(7);
            Map<String, String> fields = new LinkedHashMap<>();
            int reason = rest.indexOf(" reason=");
            if (reason >= 0) {
                fields.put("reason", rest.substring(reason + 8));
                rest = rest.substring(0, reason);
            }
            for (String token : rest.split(" ")) {
                int eq = token.indexOf('=');
                if (eq > 0) {
                    fields.putIfAbsent(token.substring(0, eq), token.substring(eq + 1));
                }
            }
            String step = fields.getOrDefault("step", "?");
            String id = step;
            for (int n = 2; results.containsKey(id); n++) {
                id = step + "#" + n;
            }
            results.put(id, fields);
        }
        return results;
    }

    public int exitCode() {
        return exitCode;
    }

    /** The RESULT fields of {@code step} ("name", or "name#2" for its second run), or an empty map if there is none. */
    public Map<String, String> result(String step) {
        return results.getOrDefault(step, Map.of());
    }

    /** Fails with the step's reason (or the driver's output) unless the step reported OK. */
    public void assertOk(String step) {
        Map<String, String> r = result(step);
        if (!"OK".equals(r.get("status"))) {
            throw new AssertionError(name + ": step " + step + " "
                + (r.isEmpty() ? "printed no RESULT" : r.get("status") + ": " + r.get("reason") + "\n  facts: " + r)
                + "\n" + report);
        }
    }

    /** The words after {@code prefix} of every output line starting with it (e.g. "GOT ", "SENT "). */
    public List<String[]> lines(String prefix) {
        return lines(output, prefix);
    }

    static List<String[]> lines(String output, String prefix) {
        List<String[]> out = new ArrayList<>();
        for (String line : output.split("\n")) {
            if (line.startsWith(prefix)) {
                out.add(line.substring(prefix.length()).trim().split(" "));
            }
        }
        return out;
    }

    /** Every RESULT line, one per step, for the test log. */
    public String summary() {
        StringBuilder sb = new StringBuilder(name).append(" (exit ").append(exitCode).append(")");
        results.forEach((step, fields) -> sb.append("\n  ").append(fields));
        return sb.toString();
    }

    public String report() {
        return report;
    }
}
