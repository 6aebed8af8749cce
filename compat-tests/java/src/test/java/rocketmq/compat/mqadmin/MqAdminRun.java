package rocketmq.compat.mqadmin;

import java.util.Arrays;
import java.util.List;

/** What one mqadmin command printed. mqadmin exits 0 even when a command fails: read the output. */
public record MqAdminRun(String commandLine, int exitCode, String stdout, String stderr) {

    public List<String> stdoutLines() {
        return Arrays.stream(stdout.split("\n")).map(String::stripTrailing).filter(l -> !l.isBlank()).toList();
    }

    /** True if the command printed neither an exception nor a failure line. */
    public boolean succeeded() {
        return exitCode == 0 && !stderr.contains("Exception") && !stdout.contains("Exception")
            && !stdout.contains("Failed");
    }

    /** The command and everything it printed, for assertion messages. */
    public String describe() {
        return "\n$ " + commandLine + "\n[exit " + exitCode + "]\n--- stdout ---\n" + stdout + "--- stderr ---\n" + stderr;
    }
}
