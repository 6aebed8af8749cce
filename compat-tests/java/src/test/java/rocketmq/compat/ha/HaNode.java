package rocketmq.compat.ha;

import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import rocketmq.compat.broker.BrokerProbe;
import rocketmq.compat.broker.JavaBroker;
import rocketmq.compat.broker.RustBroker;
import rocketmq.compat.harness.TcpForwarder;
import rocketmq.compat.harness.TcpProbe;

/**
 * One broker of a master/slave group, ours or Java's, with an in-process probe (runtime info, queue ends,
 * topics) that reconnects by itself across restarts.
 */
public final class HaNode implements AutoCloseable {
    /** The commit-log segment size of every broker in these tests: rolls come every few thousand messages. */
    public static final int SEGMENT = 1024 * 1024;
    /** A 5.x broker takes about 13 s to stop cleanly. */
    private static final Duration JAVA_STOP_GRACE = Duration.ofSeconds(30);

    private final String label;
    private final RustBroker ours;
    private final JavaBroker java;
    private final BrokerProbe probe;
    private TcpForwarder fastPortStandIn;

    private HaNode(String label, RustBroker ours, JavaBroker java) {
        this.label = label;
        this.ours = ours;
        this.java = java;
        this.probe = BrokerProbe.connect(address(), brokerName());
    }

    /** "ours" or a Java version. */
    public static boolean isOurs(String kind) {
        return kind.equals("ours");
    }

    /**
     * Starts a master ({@code SYNC_MASTER} or {@code ASYNC_MASTER}) of {@code kind}. A 5.x Java master waits for
     * its slave only with {@code inSyncReplicas=2}, so that is set.
     */
    static HaNode master(String kind, Path dir, String namesrv, String cluster, String brokerName, String role,
                         Map<String, String> extra) {
        Map<String, String> conf = common();
        conf.put("brokerId", "0");
        conf.put("brokerRole", role);
        if (!isOurs(kind) && !kind.startsWith("4.")) {
            conf.put("inSyncReplicas", "2");
        }
        conf.putAll(extra);
        return start(kind, "master", dir, namesrv, cluster, brokerName, conf);
    }

    /**
     * Starts a slave (brokerId 1) of {@code kind}; it finds its master through the name servers. A 5.x Java slave
     * serves pulls only with {@code slaveReadEnable=true}, so that is set.
     */
    static HaNode slave(String kind, Path dir, String namesrv, String cluster, String brokerName,
                        Map<String, String> extra) {
        Map<String, String> conf = common();
        conf.put("brokerId", "1");
        conf.put("brokerRole", "SLAVE");
        if (!isOurs(kind) && !kind.startsWith("4.")) {
            conf.put("slaveReadEnable", "true");
        }
        conf.putAll(extra);
        return start(kind, "slave", dir, namesrv, cluster, brokerName, conf);
    }

    /**
     * Starts a broker of {@code kind} whose role its {@code conf} decides (a member of a DLedger group, say), with
     * the settings every broker here gets (1 MiB commit-log segments, ASYNC_FLUSH; for Java the send-queue
     * timeouts below); {@code label} names it in messages ("our " or "Java <version> " is put before it).
     */
    public static HaNode node(String kind, String label, Path dir, String namesrv, String cluster, String brokerName,
                              Map<String, String> conf) {
        Map<String, String> all = common();
        all.putAll(conf);
        return start(kind, label, dir, namesrv, cluster, brokerName, all);
    }

    private static Map<String, String> common() {
        Map<String, String> conf = new LinkedHashMap<>();
        conf.put("mappedFileSizeCommitLog", Integer.toString(SEGMENT));
        conf.put("flushDiskType", "ASYNC_FLUSH");
        return conf;
    }

    private static HaNode start(String kind, String role, Path dir, String namesrv, String cluster, String brokerName,
                                Map<String, String> conf) {
        if (!isOurs(kind)) {
            // Java's fast failure refuses a send that waited 200 ms in the send queue ([TIMEOUT_CLEAN_QUEUE]
            // SYSTEM_BUSY), which happens on a busy 2-core test machine; ours has no such rule.
            conf.putIfAbsent("waitTimeMillsInSendQueue", "5000");
            conf.putIfAbsent("osPageCacheBusyTimeOutMills", "5000");
        }
        if (isOurs(kind)) {
            return new HaNode("our " + role + " " + brokerName, RustBroker.start(dir, namesrv, cluster, brokerName, conf), null);
        }
        return new HaNode("Java " + kind + " " + role + " " + brokerName,
            null, JavaBroker.start(kind, dir, namesrv, cluster, brokerName, conf));
    }

    /**
     * Ours only: unless something already listens on listenPort - 2, forwards that port to listenPort. A Java
     * slave asks its master for GET_ALL_TOPIC_CONFIG on that port (Java's fast server, which our broker does not
     * open), so without this a Java slave of our master never learns its topics.
     */
    public void standInForTheFastPort() {
        int fast = ours.port() - 2;
        if (!TcpProbe.accepts(fast)) {
            fastPortStandIn = TcpForwarder.start(fast, ours.port());
        }
    }

    public String label() {
        return label;
    }

    public boolean ours() {
        return ours != null;
    }

    public String address() {
        return ours != null ? ours.address() : java.address();
    }

    public String brokerName() {
        return ours != null ? ours.brokerName() : java.brokerName();
    }

    public Path storeDir() {
        return ours != null ? ours.storeDir() : java.storeDir();
    }

    public Path commitLogDir() {
        return StoreFiles.commitLogDir(storeDir());
    }

    public BrokerProbe probe() {
        return probe;
    }

    /** The process id of a running Java broker (for jstack), or -1 (ours, or not running). */
    public long javaPid() {
        return java != null ? java.pid() : -1;
    }

    public boolean isAlive() {
        return ours != null ? ours.isAlive() : java.isAlive();
    }

    /** SIGTERM and wait for it to exit by itself (ours must exit 0; Java's start script is not used, so its code is 143). */
    public void stop() {
        if (ours != null) {
            int code = ours.terminate();
            if (code != 0) {
                throw new AssertionError(label + " exited with " + code + " after SIGTERM\n" + ours.describe(40));
            }
        } else {
            java.terminate(JAVA_STOP_GRACE);
        }
    }

    /** SIGKILL: a crash. */
    public void kill() {
        if (ours != null) {
            ours.kill();
        } else {
            java.kill();
        }
    }

    /** Starts again on the same ports and store. */
    public void restart() {
        if (ours != null) {
            ours.restart();
        } else {
            java.restart();
        }
    }

    public String describe(int lines) {
        return label + ":\n" + (ours != null ? ours.describe(lines) : java.describe(lines));
    }

    @Override
    public void close() {
        if (fastPortStandIn != null) {
            fastPortStandIn.close();
        }
        probe.close();
        if (ours != null) {
            ours.close();
        } else {
            java.close();
        }
    }

    @Override
    public String toString() {
        return label + " at " + address();
    }
}
