package rocketmq.compat.dledger;

import java.nio.file.Path;
import java.time.Duration;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.function.Supplier;
import org.apache.rocketmq.common.protocol.body.ClusterInfo;
import org.apache.rocketmq.common.protocol.route.BrokerData;
import rocketmq.compat.broker.BrokerProbe;
import rocketmq.compat.broker.JavaBroker;
import rocketmq.compat.broker.RustBroker;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.FreePorts;
import rocketmq.compat.harness.PropertiesFile;
import rocketmq.compat.namesrv.NamesrvProbe;

/**
 * One broker folder ({@code dir/broker.conf}, {@code dir/store}) on fixed ports, run by ours or by a Java broker of
 * some version, one at a time, always with the same broker.conf: a broker hands its store to another implementation
 * by stopping (or being killed) and the other starting on the same files, ports and settings. With a DLedger group
 * the broker runs in DLedger mode as the only member {@code n0} of that group ({@code dLegerPeers =
 * n0-127.0.0.1:<free port>}), which elects itself. The conf carries the keys every implementation needs (ours and
 * Java 5.x read {@code bindAddress}; 4.9 ignores it and {@code timerWheelEnable}).
 */
public final class DlbNode implements AutoCloseable {
    /** The commit-log (and DLedger data) segment size: a roll every ~2,000 messages of these tests. */
    static final int SEGMENT = 1024 * 1024;
    static final String SELF_ID = "n0";
    /** A Java 5.3.3 broker took up to 54 s to register on this 2-core machine under load. */
    static final Duration REGISTER = Duration.ofSeconds(90);
    /** A 5.x broker takes about 13 s to stop cleanly. */
    private static final Duration JAVA_STOP_GRACE = Duration.ofSeconds(40);

    private final Path dir;
    private final Path confFile;
    private final String namesrv;
    private final String cluster;
    private final String brokerName;
    private final int port;
    private final int dledgerPort;
    private final Path dataDir;
    private RustBroker ours;
    private final Map<String, JavaBroker> javas = new HashMap<>();
    private String running;
    private long startedAt;
    private BrokerProbe probe;
    private DlbClient client;

    private DlbNode(Path dir, Path confFile, String namesrv, String cluster, String brokerName, int port, int dledgerPort,
                    Path dataDir) {
        this.dir = dir;
        this.confFile = confFile;
        this.namesrv = namesrv;
        this.cluster = cluster;
        this.brokerName = brokerName;
        this.port = port;
        this.dledgerPort = dledgerPort;
        this.dataDir = dataDir;
    }

    /**
     * Writes {@code dir/broker.conf}; nothing starts. {@code dledgerGroup} null: a plain broker (no DLedger).
     * {@code extra} keys are added (or replace the defaults).
     */
    public static DlbNode create(Path dir, String namesrv, String cluster, String brokerName, String dledgerGroup,
                          Map<String, String> extra) {
        int port = FreePorts.block(4) + 2;
        int dledgerPort = dledgerGroup == null ? -1 : FreePorts.one();
        Path store = dir.resolve("store");
        Map<String, String> conf = new LinkedHashMap<>();
        conf.put("brokerClusterName", cluster);
        conf.put("brokerName", brokerName);
        conf.put("brokerId", "0");
        conf.put("brokerIP1", "127.0.0.1");
        conf.put("brokerIP2", "127.0.0.1");
        conf.put("listenPort", Integer.toString(port));
        conf.put("bindAddress", "127.0.0.1");
        conf.put("namesrvAddr", namesrv);
        conf.put("storePathRootDir", store.toString());
        conf.put("storePathCommitLog", store.resolve("commitlog").toString());
        conf.put("mappedFileSizeCommitLog", Integer.toString(SEGMENT));
        conf.put("autoCreateTopicEnable", "true");
        conf.put("warmMapedFileEnable", "false");
        conf.put("flushDiskType", "ASYNC_FLUSH");
        conf.put("timerWheelEnable", "false");
        // Java's fast failure refuses a send that waited 200 ms in the send queue (SYSTEM_BUSY) on a busy 2-core machine.
        conf.put("waitTimeMillsInSendQueue", "5000");
        conf.put("osPageCacheBusyTimeOutMills", "5000");
        if (dledgerGroup != null) {
            conf.put("enableDLegerCommitLog", "true");
            conf.put("dLegerGroup", dledgerGroup);
            conf.put("dLegerPeers", SELF_ID + "-127.0.0.1:" + dledgerPort);
            conf.put("dLegerSelfId", SELF_ID);
        }
        conf.putAll(extra);
        Path dataDir = conf.containsKey("storePathDLedgerCommitLog") ? Path.of(conf.get("storePathDLedgerCommitLog"))
            : store.resolve("dledger-" + SELF_ID).resolve("data");
        Path confFile = PropertiesFile.write(dir.resolve("broker.conf"), conf);
        return new DlbNode(dir, confFile, namesrv, cluster, brokerName, port, dledgerPort, dataDir);
    }

    static boolean isOurs(String kind) {
        return kind.equals("ours");
    }

    static String label(String kind) {
        return isOurs(kind) ? "our broker" : "Java " + kind + " broker";
    }

    /**
     * Starts the broker as {@code kind} ("ours" or a Java version) on this folder; returns once it accepts
     * connections (ours: once it also printed "boot success").
     */
    public void start(String kind) {
        if (running != null && isAlive()) {
            throw new IllegalStateException(label() + " is still running");
        }
        running = kind;
        startedAt = System.nanoTime();
        if (isOurs(kind)) {
            if (ours == null) {
                ours = RustBroker.startWithConf(dir, confFile, cluster, brokerName, port);
            } else {
                ours.restart();
            }
        } else {
            JavaBroker java = javas.get(kind);
            if (java == null) {
                javas.put(kind, JavaBroker.startWithConf(kind, dir, confFile, namesrv, cluster, brokerName, port));
            } else {
                java.restart();
            }
        }
        if (probe == null) {
            probe = BrokerProbe.connect(address(), brokerName);
            client = DlbClient.connect(address());
        }
    }

    /** SIGTERM and wait for it to exit by itself (ours must exit 0; a JVM ended by SIGTERM exits 143). */
    public void stop() {
        long t = System.nanoTime();
        stopNow();
        System.out.printf("%s: stopped in %d ms%n", label(), (System.nanoTime() - t) / 1_000_000);
    }

    private void stopNow() {
        if (isOurs(running)) {
            int code = ours.terminate();
            if (code != 0) {
                throw new AssertionError(label() + " exited with " + code + " after SIGTERM\n" + ours.describe(60));
            }
        } else {
            javas.get(running).terminate(JAVA_STOP_GRACE);
        }
    }

    /** SIGKILL: a crash. */
    public void kill() {
        if (isOurs(running)) {
            ours.kill();
        } else {
            javas.get(running).kill();
        }
    }

    public boolean isAlive() {
        if (running == null) {
            return false;
        }
        return isOurs(running) ? ours != null && ours.isAlive() : javas.containsKey(running) && javas.get(running).isAlive();
    }

    /**
     * Waits until the name servers list this broker as the master (brokerId 0) of its broker name: in DLedger mode
     * a broker registers as master once its member leads and has dispatched its log.
     */
    public void awaitMaster(NamesrvProbe namesrvProbe, Supplier<String> diagnostics) {
        Await.until(label() + " at " + address() + " registered as the master of " + brokerName, REGISTER, () -> {
            if (!isAlive()) {
                throw new AssertionError(label() + " exited\n" + describe(80));
            }
            ClusterInfo info = namesrvProbe.clusterInfo();
            BrokerData b = info.getBrokerAddrTable() == null ? null : info.getBrokerAddrTable().get(brokerName);
            return b != null && address().equals(b.getBrokerAddrs().get(0L));
        }, diagnostics);
        System.out.printf("%s: registered as master %d ms after its start%n", label(), (System.nanoTime() - startedAt) / 1_000_000);
    }

    /** The kind running now (or last): "ours" or a Java version. */
    public String kind() {
        return running;
    }

    public String label() {
        return running == null ? "broker " + brokerName : label(running) + " " + brokerName;
    }

    public String address() {
        return "127.0.0.1:" + port;
    }

    int dledgerPort() {
        return dledgerPort;
    }

    public String brokerName() {
        return brokerName;
    }

    public Path dir() {
        return dir;
    }

    public Path confFile() {
        return confFile;
    }

    public Path storeDir() {
        return dir.resolve("store");
    }

    Path commitLogDir() {
        return storeDir().resolve("commitlog");
    }

    /** The DLedger data segments: storePathDLedgerCommitLog, or {@code store/dledger-n0/data}. */
    Path dataDir() {
        return dataDir;
    }

    /** {@code store/dledger-n0}: checkpoint, currterm, index/. */
    Path dledgerDir() {
        return storeDir().resolve("dledger-" + SELF_ID);
    }

    public BrokerProbe probe() {
        return probe;
    }

    DlbClient client() {
        return client;
    }

    /** The output of every broker that ran on this folder, the running one last. */
    public String describe(int lines) {
        StringBuilder sb = new StringBuilder();
        for (Map.Entry<String, JavaBroker> j : javas.entrySet()) {
            if (!j.getKey().equals(running)) {
                sb.append(j.getValue().describe(lines / 2)).append('\n');
            }
        }
        if (ours != null && !isOurs(String.valueOf(running))) {
            sb.append(ours.describe(lines / 2)).append('\n');
        }
        if (running != null) {
            sb.append(isOurs(running) ? ours.describe(lines) : javas.get(running).describe(lines));
        }
        return sb.length() == 0 ? "(" + label() + " never started)" : sb.toString();
    }

    @Override
    public void close() {
        if (client != null) {
            client.close();
        }
        if (probe != null) {
            probe.close();
        }
        if (ours != null) {
            ours.close();
        }
        javas.values().forEach(JavaBroker::close);
    }

    @Override
    public String toString() {
        return label() + " at " + address();
    }
}
