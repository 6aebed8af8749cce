package rocketmq.compat.dledger;

import java.nio.file.Path;
import java.util.LinkedHashMap;
import java.util.Map;
import rocketmq.compat.broker.BrokerProbe;
import rocketmq.compat.ha.HaNode;

/**
 * One broker of a DLedger group ({@code enableDLegerCommitLog=true}), ours or Java's of a version, through
 * {@link HaNode} (ours: {@code mqbroker -c broker.conf}; Java: BrokerStartup), with Java's keys: {@code dLegerGroup},
 * {@code dLegerPeers}, {@code dLegerSelfId}. Its DLedger member listens on its port in the peers; its DLedger files are
 * {@code <storePathRootDir>/dledger-<selfId>/}. Every broker of a group has the same brokerName; the role and brokerId
 * come from DLedger (Java: the leader registers as master, brokerId 0, a follower as a slave with brokerId
 * {@code int(selfId.substring(1)) + 1}).
 */
final class DLedgerBroker implements AutoCloseable {
    private final String kind;
    private final String selfId;
    private final int dledgerPort;
    private final HaNode node;

    private DLedgerBroker(String kind, String selfId, int dledgerPort, HaNode node) {
        this.kind = kind;
        this.selfId = selfId;
        this.dledgerPort = dledgerPort;
        this.node = node;
    }

    /** Starts the broker; returns once it listens (not once it leads or follows). */
    static DLedgerBroker start(String kind, Path dir, String namesrv, String cluster, String brokerName, String dledgerGroup,
                               String peers, String selfId, int dledgerPort, Map<String, String> extra) {
        Map<String, String> conf = new LinkedHashMap<>();
        conf.put("enableDLegerCommitLog", "true");
        conf.put("dLegerGroup", dledgerGroup);
        conf.put("dLegerPeers", peers);
        conf.put("dLegerSelfId", selfId);
        // Java's DLedger deployment guide sets more send threads: a send waits for the quorum.
        conf.put("sendMessageThreadPoolNums", "4");
        conf.putAll(extra);
        HaNode node = HaNode.node(kind, "DLedger " + selfId, dir, namesrv, cluster, brokerName, conf);
        return new DLedgerBroker(kind, selfId, dledgerPort, node);
    }

    String kind() {
        return kind;
    }

    boolean ours() {
        return HaNode.isOurs(kind);
    }

    String selfId() {
        return selfId;
    }

    /** The brokerId Java gives this member as a follower: {@code int(selfId.substring(1)) + 1}. */
    long slaveBrokerId() {
        return Integer.parseInt(selfId.substring(1)) + 1;
    }

    int dledgerPort() {
        return dledgerPort;
    }

    HaNode node() {
        return node;
    }

    String label() {
        return node.label();
    }

    String address() {
        return node.address();
    }

    BrokerProbe probe() {
        return node.probe();
    }

    Path storeDir() {
        return node.storeDir();
    }

    /** {@code <storePathRootDir>/dledger-<selfId>}: checkpoint, currterm, data/, index/. */
    Path nodeDir() {
        return storeDir().resolve("dledger-" + selfId);
    }

    /** The member's current term, from its {@code currterm} file. */
    long currentTerm() {
        return DLedgerFiles.currentTerm(nodeDir());
    }

    boolean isAlive() {
        return node.isAlive();
    }

    /** SIGTERM, waiting for the exit (ours must exit 0). */
    void stop() {
        node.stop();
    }

    /** SIGKILL. */
    void kill() {
        node.kill();
    }

    /** Starts again on the same ports, conf and store. */
    void restart() {
        node.restart();
    }

    String describe(int lines) {
        return node.describe(lines);
    }

    @Override
    public void close() {
        node.close();
    }

    @Override
    public String toString() {
        return label() + " at " + address() + " (DLedger 127.0.0.1:" + dledgerPort + ")";
    }
}
