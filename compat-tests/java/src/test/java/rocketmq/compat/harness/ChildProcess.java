package rocketmq.compat.harness;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * A process this test run started: output goes to files, {@link #close()} stops it (SIGTERM, by default
 * up to 10 s, then SIGKILL), and a JVM shutdown hook kills whatever is still running if the test JVM goes away.
 */
public final class ChildProcess implements AutoCloseable {
    private static final Duration DEFAULT_STOP_GRACE = Duration.ofSeconds(10);
    private static final Set<ChildProcess> LIVE = ConcurrentHashMap.newKeySet();

    static {
        Runtime.getRuntime().addShutdownHook(new Thread(() -> LIVE.forEach(c -> {
            c.process.descendants().forEach(ProcessHandle::destroyForcibly);
            c.process.destroyForcibly();
        }), "kill-child-processes"));
    }

    private final String name;
    private final Process process;
    private final Path stdout;
    private final Path stderr;
    private final String commandLine;
    private final Duration stopGrace;

    private ChildProcess(String name, Process process, Path stdout, Path stderr, String commandLine,
                         Duration stopGrace) {
        this.stopGrace = stopGrace;
        this.name = name;
        this.process = process;
        this.stdout = stdout;
        this.stderr = stderr;
        this.commandLine = commandLine;
    }

    public static Builder builder(String name) {
        return new Builder(name);
    }

    public String name() {
        return name;
    }

    public boolean isAlive() {
        return process.isAlive();
    }

    /** Waits for the process to end by itself; kills it and fails if it takes longer than {@code timeout}. */
    public int awaitExit(Duration timeout) {
        try {
            if (!process.waitFor(timeout.toMillis(), TimeUnit.MILLISECONDS)) {
                close();
                throw new AssertionError(name + " did not finish within " + timeout.toSeconds() + " s (killed)\n"
                    + describe(80));
            }
            LIVE.remove(this);
            return process.exitValue();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            close();
            throw new AssertionError("interrupted while waiting for " + name, e);
        }
    }

    /** Everything the process wrote to stdout (stdout and stderr when they share a file). */
    public String stdout() {
        return read(stdout);
    }

    /** Everything the process wrote to stderr ("" when stderr goes to the stdout file). */
    public String stderr() {
        return stderr.equals(stdout) ? "" : read(stderr);
    }

    /** Name, pid, state, command and the last {@code lines} lines of its output, for failure messages. */
    public String describe(int lines) {
        StringBuilder sb = new StringBuilder();
        sb.append("---- ").append(name).append(" (pid ").append(process.pid()).append(", ")
            .append(process.isAlive() ? "running" : "exit code " + process.exitValue()).append(") ----\n")
            .append("command: ").append(commandLine).append('\n')
            .append("-- last ").append(lines).append(" lines of ").append(stdout).append(" --\n")
            .append(tail(read(stdout), lines));
        if (!stderr.equals(stdout)) {
            sb.append("-- last ").append(lines).append(" lines of ").append(stderr).append(" --\n")
                .append(tail(read(stderr), lines));
        }
        return sb.toString();
    }

    /** {@link #describe} of every process that is still running. */
    public static String describeLive(int lines) {
        StringBuilder sb = new StringBuilder();
        for (ChildProcess c : LIVE) {
            sb.append(c.describe(lines)).append('\n');
        }
        return sb.length() == 0 ? "(no child process running)" : sb.toString();
    }

    /** The process id, for messages. */
    public long pid() {
        return process.pid();
    }

    /**
     * SIGTERM, then waits up to the stop grace. Returns the exit code if the process ended by itself in
     * time; otherwise it is killed (SIGKILL) and this fails.
     */
    public int terminate() {
        return terminate(stopGrace);
    }

    /** As {@link #terminate()}, waiting up to {@code grace} instead of the stop grace. */
    public int terminate(Duration grace) {
        try {
            process.destroy();
            if (!process.waitFor(grace.toMillis(), TimeUnit.MILLISECONDS)) {
                close();
                throw new AssertionError(name + " did not exit within " + grace.toSeconds()
                    + " s of SIGTERM (killed)\n" + describe(60));
            }
            LIVE.remove(this);
            return process.exitValue();
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            close();
            throw new AssertionError("interrupted while stopping " + name, e);
        }
    }

    /** SIGKILL without warning (a crash), and waits until the process is gone. */
    public void kill() {
        try {
            process.destroyForcibly();
            if (!process.waitFor(DEFAULT_STOP_GRACE.toMillis(), TimeUnit.MILLISECONDS)) {
                throw new AssertionError(name + " still running " + DEFAULT_STOP_GRACE.toSeconds() + " s after SIGKILL");
            }
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted while killing " + name, e);
        } finally {
            LIVE.remove(this);
        }
    }

    @Override
    public void close() {
        try {
            if (process.isAlive()) {
                List<ProcessHandle> descendants = process.descendants().toList();
                process.destroy();
                if (!process.waitFor(stopGrace.toMillis(), TimeUnit.MILLISECONDS)) {
                    process.destroyForcibly();
                    process.waitFor(DEFAULT_STOP_GRACE.toMillis(), TimeUnit.MILLISECONDS);
                }
                descendants.forEach(ProcessHandle::destroyForcibly);
            }
        } catch (InterruptedException e) {
            process.destroyForcibly();
            Thread.currentThread().interrupt();
        } finally {
            LIVE.remove(this);
        }
    }

    static String tail(String text, int lines) {
        String[] all = text.split("\n", -1);
        int from = Math.max(0, all.length - lines - 1);
        return String.join("\n", java.util.Arrays.asList(all).subList(from, all.length));
    }

    private static String read(Path file) {
        try {
            return Files.exists(file) ? Files.readString(file, StandardCharsets.UTF_8) : "(no file " + file + ")";
        } catch (IOException e) {
            return "(cannot read " + file + ": " + e + ")";
        }
    }

    /** Collects what is needed to start a child process. */
    public static final class Builder {
        private final String name;
        private final List<String> command = new ArrayList<>();
        private final Map<String, String> env = new LinkedHashMap<>();
        private Path directory;
        private Path stdout;
        private Path stderr;
        private Duration stopGrace = DEFAULT_STOP_GRACE;

        private Builder(String name) {
            this.name = name;
        }

        public Builder command(List<String> args) {
            command.addAll(args);
            return this;
        }

        public Builder env(String key, String value) {
            env.put(key, value);
            return this;
        }

        public Builder directory(Path dir) {
            this.directory = dir;
            return this;
        }

        /** How long {@link #close()} waits after SIGTERM before SIGKILL (default 10 s). */
        public Builder stopGrace(Duration grace) {
            this.stopGrace = grace;
            return this;
        }

        /** Sends stdout and stderr to one file. */
        public Builder output(Path file) {
            this.stdout = file;
            this.stderr = file;
            return this;
        }

        public Builder output(Path out, Path err) {
            this.stdout = out;
            this.stderr = err;
            return this;
        }

        public ChildProcess start() {
            if (directory == null || stdout == null) {
                throw new IllegalStateException("directory and output are required for " + name);
            }
            ProcessBuilder pb = new ProcessBuilder(command).directory(directory.toFile());
            pb.environment().putAll(env);
            pb.redirectInput(ProcessBuilder.Redirect.from(nullDevice()));
            pb.redirectOutput(ProcessBuilder.Redirect.to(stdout.toFile()));
            if (stderr.equals(stdout)) {
                pb.redirectErrorStream(true);
            } else {
                pb.redirectError(ProcessBuilder.Redirect.to(stderr.toFile()));
            }
            try {
                Files.createDirectories(directory);
                Files.createDirectories(stdout.getParent());
                Process process = pb.start();
                ChildProcess child = new ChildProcess(name, process, stdout, stderr, display(command), stopGrace);
                LIVE.add(child);
                return child;
            } catch (IOException e) {
                throw new UncheckedIOException("cannot start " + name + ": " + String.join(" ", command), e);
            }
        }

        /** The command line with classpaths shortened to their entry count. */
        private static String display(List<String> command) {
            List<String> shown = new ArrayList<>(command);
            for (int i = 1; i < shown.size(); i++) {
                if (shown.get(i - 1).equals("-cp")) {
                    shown.set(i, "<classpath of " + shown.get(i).split(":").length + " entries>");
                }
            }
            return String.join(" ", shown);
        }

        private static java.io.File nullDevice() {
            return new java.io.File("/dev/null");
        }
    }
}
