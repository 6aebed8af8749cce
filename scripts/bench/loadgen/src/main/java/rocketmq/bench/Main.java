package rocketmq.bench;

/**
 * {@code loadgen broker --namesrv A --mode sync|async|batch ... --out FILE} or
 * {@code loadgen namesrv --namesrv A ... --out FILE} or
 * {@code loadgen grpc --namesrv A --endpoint GRPC --broker-addr B ... --out FILE} or
 * {@code loadgen timer --namesrv A --messages N --window-s W --lead-s L ... --out FILE}; see scripts/bench.sh for the
 * options it passes.
 * A watchdog ends the JVM if a run hangs, so the harness always gets to the next workload.
 */
public final class Main {
    private Main() {
    }

    public static void main(String[] argv) throws Exception {
        if (argv.length < 1) {
            System.err.println("usage: loadgen broker|namesrv|grpc|timer --namesrv ADDR [--key value ...]");
            System.exit(2);
        }
        Args a = new Args(argv, 1);
        // timer: its due window (lead + window) on top, and 60 s for the warm-up timers' delivery
        long timer = argv[0].equals("timer") ? a.integer("lead-s", 30) + a.integer("window-s", 120) + 60 : 0;
        long limit = a.integer("warmup", 5) + a.integer("duration", 20) + a.integer("drain", 60) + 180 + timer;
        Thread watchdog = new Thread(() -> {
            try {
                Thread.sleep(limit * 1000);
                System.err.println("[loadgen] still running after " + limit + " s: giving up");
                Runtime.getRuntime().halt(3);
            } catch (InterruptedException ignored) {
                // finished in time
            }
        }, "watchdog");
        watchdog.setDaemon(true);
        watchdog.start();
        try {
            switch (argv[0]) {
                case "broker" -> BrokerLoad.run(a);
                case "namesrv" -> RouteLoad.run(a);
                case "grpc" -> GrpcLoad.run(a);
                case "timer" -> TimerLoad.run(a);
                default -> throw new IllegalArgumentException("unknown load " + argv[0]);
            }
        } catch (Throwable t) {
            t.printStackTrace();
            Runtime.getRuntime().halt(1);
        }
        Runtime.getRuntime().halt(0);
    }

    /** Client shutdowns can wait on timers; the figures are written already, so give them 5 s at most. */
    static void shutdownQuietly(Runnable... steps) {
        Thread t = new Thread(() -> {
            for (Runnable s : steps) {
                if (s != null) {
                    try {
                        s.run();
                    } catch (RuntimeException ignored) {
                        // the process ends anyway
                    }
                }
            }
        }, "shutdown");
        t.setDaemon(true);
        t.start();
        try {
            t.join(5000);
        } catch (InterruptedException ignored) {
            Thread.currentThread().interrupt();
        }
    }
}
