package rocketmq.compat.ha;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Supplier;
import rocketmq.compat.client.DriverRun;
import rocketmq.compat.harness.Await;
import rocketmq.compat.namesrv.NamesrvProbe;

/** What the master/slave test classes share: driver runs, waiting for a slave, comparing stores. */
public final class Ha {
    public static final String CLIENT = "rocketmq-client";
    /** Time for a slave to catch up with what its master holds. */
    public static final Duration CATCH_UP = Duration.ofSeconds(60);
    /** Time for a broker to (un)register or for its slave to connect. */
    public static final Duration REGISTER = Duration.ofSeconds(60);

    private Ha() {
    }

    /** Runs {@code HaDriver} with {@code steps} against the name server(s) {@code namesrv}, to its exit. */
    public static DriverRun drive(String version, String serializeType, String namesrv, Path dir, String what, String... steps) {
        DriverRun run = DriverRun.run("HaDriver", CLIENT, version, serializeType, dir.resolve(what + "-" + System.nanoTime()),
            args(namesrv, steps));
        System.out.println(what + ": " + run.summary());
        return run;
    }

    /** Starts {@code HaDriver} and returns at once. */
    public static DriverRun.Running start(String version, String serializeType, String namesrv, Path dir, String what,
                                   String... steps) {
        return DriverRun.start("HaDriver", CLIENT, version, serializeType, dir.resolve(what + "-" + System.nanoTime()),
            args(namesrv, steps));
    }

    private static String[] args(String namesrv, String... steps) {
        String[] args = new String[steps.length + 1];
        args[0] = namesrv;
        System.arraycopy(steps, 0, args, 1, steps.length);
        return args;
    }

    /** {@code produce} with every send required to be SEND_OK. */
    public static String produceAll(String topic, String prefix, int count, int threads) {
        return "produce:" + topic + ":" + prefix + ":" + count + ":" + threads + ":0:-:true";
    }

    /** As {@link #produceAll}, but the step reports every status instead of failing on one that is not SEND_OK. */
    public static String produceEach(String topic, String prefix, int count, int threads) {
        return "produce:" + topic + ":" + prefix + ":" + count + ":" + threads + ":0:-:false";
    }

    /** Fails unless the {@code produce} step reported OK, naming the sends that were not SEND_OK and why. */
    public static void assertProduced(DriverRun run) {
        assertProduced(run, () -> "");
    }

    /** As {@link #assertProduced(DriverRun)}, printing {@code diagnostics} (the brokers' logs) on a failure. */
    public static void assertProduced(DriverRun run, Supplier<String> diagnostics) {
        List<String> bad = new ArrayList<>();
        for (String prefix : List.of("FAIL ", "NOTOK ")) {
            run.lines(prefix).stream().limit(10).forEach(w -> bad.add(prefix + String.join(" ", w)));
        }
        if (!"OK".equals(run.result("produce").get("status"))) {
            System.out.println("sends that were not SEND_OK:\n  " + String.join("\n  ", bad));
            System.out.println(diagnostics.get());
        }
        run.assertOk("produce");
    }

    /** The keys of the {@code OK} lines of a produce step. */
    public static Set<String> sentOk(List<String[]> okLines) {
        Set<String> keys = new HashSet<>();
        for (String[] w : okLines) {
            keys.add(w[0]);
        }
        return keys;
    }

    /** Waits until both brokers answer and register: the master with id 0, the slave with id 1, under one name. */
    static void awaitGroupRegistered(NamesrvProbe probe, HaNode master, HaNode slave, Supplier<String> diagnostics) {
        Await.until(master.brokerName() + " registered with master " + master.address() + " and slave " + slave.address(),
            REGISTER, probe::clusterInfo,
            info -> info.getBrokerAddrTable() != null && info.getBrokerAddrTable().containsKey(master.brokerName())
                && master.address().equals(info.getBrokerAddrTable().get(master.brokerName()).getBrokerAddrs().get(0L))
                && slave.address().equals(info.getBrokerAddrTable().get(master.brokerName()).getBrokerAddrs().get(1L)),
            diagnostics);
    }

    /**
     * Waits until the slave holds everything the master holds and both dispatched it to their consume queues;
     * returns the common commit-log end.
     */
    static long awaitCaughtUp(HaNode master, HaNode slave, Supplier<String> diagnostics) {
        long[] ends = Await.until(slave.label() + " holding and dispatching all of " + master.label() + "'s commit log",
            CATCH_UP, () -> new long[] {master.probe().commitLogMaxOffset(), slave.probe().commitLogMaxOffset(),
                master.probe().dispatchBehindBytes(), slave.probe().dispatchBehindBytes()},
            e -> e[0] > 0 && e[0] == e[1] && e[2] == 0 && e[3] == 0,
            diagnostics) ;
        return ends[0];
    }

    /** Queue id to queue end (GET_MAX_OFFSET) for the first {@code queues} queues of {@code topic}. */
    static Map<Integer, Long> queueEnds(HaNode node, String topic, int queues) throws Exception {
        Map<Integer, Long> ends = new TreeMap<>();
        for (int q = 0; q < queues; q++) {
            ends.put(q, node.probe().maxOffset(topic, q));
        }
        return ends;
    }

    /**
     * The slave's commit log equals the master's over [start of the slave's first segment, masterEnd), the data
     * end read from the master's bytes is {@code masterEnd}, and the consume queues of {@code topic} hold the
     * same units. Returns the start of the compared range.
     */
    static long assertReplica(HaNode master, HaNode slave, long masterEnd, String topic, Map<Integer, Long> queueEnds) {
        assertEquals(masterEnd, StoreFiles.dataEnd(master.commitLogDir()),
            "the data end found in " + master.label() + "'s commit-log files");
        long from = StoreFiles.firstSegment(slave.commitLogDir());
        assertTrue(from < masterEnd, slave.label() + " holds nothing below the master's end " + masterEnd);
        StoreFiles.assertSameBytes(master.commitLogDir(), slave.commitLogDir(), from, masterEnd,
            slave.label() + "'s commit log against " + master.label() + "'s");
        StoreFiles.assertSameConsumeQueues(master.storeDir(), slave.storeDir(), topic, queueEnds,
            slave.label() + " against " + master.label());
        System.out.println(slave.label() + ": commit log identical to " + master.label() + "'s over [" + from + ", "
            + masterEnd + ") (" + (masterEnd - from) + " bytes, " + StoreFiles.segments(master.commitLogDir()).headMap(masterEnd).size()
            + " segments of the master), consume queues of " + topic + " identical " + queueEnds);
        return from;
    }

    static String describe(HaNode... nodes) {
        List<String> parts = new ArrayList<>();
        for (HaNode n : nodes) {
            if (n != null) {
                parts.add(n.describe(40));
            }
        }
        return String.join("\n", parts);
    }

    public static void closeAll(AutoCloseable... things) {
        for (AutoCloseable c : things) {
            if (c != null) {
                try {
                    c.close();
                } catch (Exception e) {
                    System.out.println("closing " + c + ": " + e);
                }
            }
        }
    }
}
