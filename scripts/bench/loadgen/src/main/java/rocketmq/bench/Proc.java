package rocketmq.bench;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;

/**
 * What the kernel says about a process: CPU time (utime + stime of all its threads, from
 * /proc/PID/stat) and memory (VmHWM, VmRSS, RssAnon from /proc/PID/status). The server runs on its own
 * core, so its CPU time per message is the cost we compare; VmHWM is the peak resident set since the
 * process started (the harness starts a fresh server per workload, so it is per workload).
 */
final class Proc {
    private final long pid;
    private final long clkTck;
    private volatile long peakAnonKb;
    private volatile long peakRssKb;

    Proc(long pid, long clkTck) {
        this.pid = pid;
        this.clkTck = clkTck;
    }

    /** utime + stime in seconds. */
    double cpuSeconds() {
        try {
            String stat = Files.readString(Path.of("/proc/" + pid + "/stat"));
            // the command name (field 2) may hold spaces; fields after its closing ')' are plain
            String[] f = stat.substring(stat.lastIndexOf(')') + 2).split(" ");
            // after ')' the first field is state (field 3), so utime (14) and stime (15) sit at 11 and 12
            return (Long.parseLong(f[11]) + Long.parseLong(f[12])) / (double) clkTck;
        } catch (IOException e) {
            throw new IllegalStateException("process " + pid + " is gone (" + e + ")");
        }
    }

    boolean alive() {
        return Files.exists(Path.of("/proc/" + pid + "/stat"));
    }

    /** A field of /proc/PID/status in kB, or -1 when absent. */
    long statusKb(String field) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/" + pid + "/status"))) {
                if (line.startsWith(field + ":")) {
                    return Long.parseLong(line.substring(field.length() + 1).trim().split("\\s+")[0]);
                }
            }
            return -1;
        } catch (IOException e) {
            return -1;
        }
    }

    /** Samples RssAnon and VmRSS every 200 ms on a daemon thread (VmHWM has no anonymous-only twin). */
    void startSampler() {
        Thread t = new Thread(() -> {
            while (true) {
                sample();
                try {
                    Thread.sleep(200);
                } catch (InterruptedException e) {
                    return;
                }
            }
        }, "rss-sampler");
        t.setDaemon(true);
        t.start();
    }

    void sample() {
        peakAnonKb = Math.max(peakAnonKb, statusKb("RssAnon"));
        peakRssKb = Math.max(peakRssKb, statusKb("VmRSS"));
    }

    long peakAnonKb() {
        return peakAnonKb;
    }

    long peakRssKb() {
        return peakRssKb;
    }

    /**
     * Jiffies {busy, total} of one core from /proc/stat, to tell how busy the core was in all (the
     * server's own share is known from its utime + stime): the rest is other work on this machine,
     * which makes a run less trustworthy.
     */
    static long[] coreJiffies(int cpu) {
        try {
            for (String line : Files.readAllLines(Path.of("/proc/stat"))) {
                if (line.startsWith("cpu" + cpu + " ")) {
                    String[] f = line.trim().split("\\s+");
                    long user = Long.parseLong(f[1]), nice = Long.parseLong(f[2]), system = Long.parseLong(f[3]);
                    long idle = Long.parseLong(f[4]), iowait = Long.parseLong(f[5]), irq = Long.parseLong(f[6]);
                    long softirq = Long.parseLong(f[7]), steal = f.length > 8 ? Long.parseLong(f[8]) : 0;
                    long busy = user + nice + system + irq + softirq + steal;
                    return new long[] {busy, busy + idle + iowait};
                }
            }
        } catch (IOException | RuntimeException e) {
            // reported as unknown
        }
        return new long[] {0, 0};
    }

    /** The busy fraction of a core between two {@link #coreJiffies} readings, or NaN. */
    static double busyFraction(long[] before, long[] after) {
        long total = after[1] - before[1];
        return total <= 0 ? Double.NaN : (after[0] - before[0]) / (double) total;
    }

    static long self() {
        return ProcessHandle.current().pid();
    }
}
