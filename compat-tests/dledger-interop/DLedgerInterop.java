/*
 * DLedger interop driver: runs the real Java io.openmessaging.storage.dledger.store.file.DLedgerMmapFileStore
 * (0.3.1.2) to
 *   write - append the deterministic DATASET as a leader (n0) and feed every entry to a follower (n1) through
 *           appendAsFollower, both under <baseDir>, commit, shut down cleanly, and dump a manifest per member;
 *   read  - open an existing member directory (Java's or ours), dump what it recovered, optionally append more
 *           DATASET entries as leader in a new term, shut down, and dump the final log.
 * See README.md in this directory for the dataset and the manifest contract.
 */

import java.io.File;
import java.io.IOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.List;

import io.openmessaging.storage.dledger.DLedgerConfig;
import io.openmessaging.storage.dledger.MemberState;
import io.openmessaging.storage.dledger.entry.DLedgerEntry;
import io.openmessaging.storage.dledger.store.file.DLedgerMmapFileStore;

public class DLedgerInterop {
    static final String GROUP = "interop";
    static final String PEERS = "n0-127.0.0.1:40911;n1-127.0.0.1:40912";
    /** RocketMQ's MessageDecoder.PHY_POS_POSITION: where DLedgerCommitLog's hook writes the physical offset. */
    static final int PHY_POS_POSITION = 28;

    static int count = 500;
    static int dataSize = 16 * 1024;
    static int indexSize = 32 * 64;
    static int append = 0;
    static boolean hook = true;

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            usage();
        }
        String command = args[0];
        List<String> positional = new ArrayList<>();
        for (int i = 1; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--count": count = Integer.parseInt(args[++i]); break;
                case "--data-size": dataSize = Integer.parseInt(args[++i]); break;
                case "--index-size": indexSize = Integer.parseInt(args[++i]); break;
                case "--append": append = Integer.parseInt(args[++i]); break;
                case "--no-hook": hook = false; break;
                default:
                    if (a.startsWith("--")) {
                        usage();
                    }
                    positional.add(a);
            }
        }
        if (command.equals("write") && positional.size() == 2) {
            write(positional.get(0), positional.get(1));
        } else if (command.equals("read") && positional.size() == 3) {
            read(positional.get(0), positional.get(1), positional.get(2));
        } else {
            usage();
        }
        System.exit(0);
    }

    static void usage() {
        System.err.println("usage: DLedgerInterop write <baseDir> <manifestPrefix> | read <baseDir> <selfId> <manifest> [--count N] [--data-size B] [--index-size B] [--append M] [--no-hook]");
        System.exit(2);
    }

    /** DATASET body i (before the hook). */
    static byte[] body(long i) {
        int len = (i % 37 == 0) ? (int) (3000 + i % 1000) : (int) (1 + (i * 7919) % 700);
        byte[] b = new byte[len];
        for (int j = 0; j < len; j++) {
            b[j] = (byte) ((i * 31 + j) & 0xFF);
        }
        return b;
    }

    /** The term of DATASET entry i written by `write`: 1 for the first half, 2 after. */
    static long termOf(long i) {
        return i < count / 2 ? 1 : 2;
    }

    static DLedgerConfig config(String base, String selfId) {
        DLedgerConfig c = new DLedgerConfig();
        c.setGroup(GROUP);
        c.setSelfId(selfId);
        c.setPeers(PEERS);
        c.setStoreBaseDir(base);
        c.setMappedFileSizeForEntryData(dataSize);
        c.setMappedFileSizeForEntryIndex(indexSize);
        return c;
    }

    static DLedgerMmapFileStore open(DLedgerConfig c, MemberState ms) {
        DLedgerMmapFileStore store = new DLedgerMmapFileStore(c, ms);
        store.setEnableCleanSpaceService(false);
        if (hook) {
            // RocketMQ DLedgerCommitLog's hook: the record's physical offset into its body.
            store.addAppendHook((entry, buffer, bodyOffset) -> {
                if (entry.getBody().length >= PHY_POS_POSITION + 8) {
                    buffer.position(buffer.position() + bodyOffset + PHY_POS_POSITION);
                    buffer.putLong(entry.getPos() + bodyOffset);
                }
            });
        }
        store.startup();
        return store;
    }

    /** A new term with this member as leader (and its vote for itself), as an election would leave it. */
    static void becomeLeader(MemberState ms, String selfId) {
        ms.changeToCandidate(ms.currTerm());
        ms.nextTerm();
        ms.setCurrVoteFor(selfId);
        ms.changeToLeader(ms.currTerm());
    }

    static void becomeFollower(MemberState ms, long term, String leaderId) {
        ms.changeToCandidate(term);
        ms.nextTerm();
        ms.setCurrVoteFor(leaderId);
        ms.changeToFollower(term, leaderId);
    }

    static void write(String base, String manifestPrefix) throws Exception {
        MemberState leaderState = new MemberState(config(base, "n0"));
        MemberState followerState = new MemberState(config(base, "n1"));
        DLedgerMmapFileStore leader = open(config(base, "n0"), leaderState);
        DLedgerMmapFileStore follower = open(config(base, "n1"), followerState);
        for (long i = 0; i < count; i++) {
            long term = termOf(i);
            if (leaderState.currTerm() != term) {
                becomeLeader(leaderState, "n0");
                becomeFollower(followerState, term, "n0");
            }
            DLedgerEntry e = new DLedgerEntry();
            e.setBody(body(i));
            DLedgerEntry stored = leader.appendAsLeader(e);
            check(stored.getIndex() == i && stored.getTerm() == term, "leader append " + i);
            follower.appendAsFollower(leader.get(i), term, "n0");
        }
        long term = leaderState.currTerm();
        leader.updateCommittedIndex(term, count - 3);
        follower.updateCommittedIndex(term, count - 5);
        String leaderManifest = manifest(leader, leaderState, null);
        String followerManifest = manifest(follower, followerState, null);
        leader.shutdown();
        follower.shutdown();
        writeFile(manifestPrefix + "-n0.json", leaderManifest);
        writeFile(manifestPrefix + "-n1.json", followerManifest);
    }

    static void read(String base, String selfId, String manifestPath) throws Exception {
        MemberState ms = new MemberState(config(base, selfId));
        DLedgerMmapFileStore store = open(config(base, selfId), ms);
        String recovered = "{\"beginIndex\":" + store.getLedgerBeginIndex() + ",\"endIndex\":" + store.getLedgerEndIndex()
            + ",\"endTerm\":" + store.getLedgerEndTerm() + ",\"committedIndex\":" + store.getCommittedIndex()
            + ",\"committedPos\":" + store.getCommittedPos() + ",\"writePos\":" + store.getWritePos()
            + ",\"currTerm\":" + ms.currTerm() + ",\"voteFor\":" + jsonString(ms.currVoteFor()) + "}";
        // Every entry must read back before anything is appended.
        entries(store);
        if (append > 0) {
            becomeLeader(ms, selfId);
            long from = store.getLedgerEndIndex() + 1;
            for (long i = from; i < from + append; i++) {
                DLedgerEntry e = new DLedgerEntry();
                e.setBody(body(i));
                DLedgerEntry stored = store.appendAsLeader(e);
                check(stored.getIndex() == i, "append " + i);
            }
            store.updateCommittedIndex(ms.currTerm(), store.getLedgerEndIndex() - 1);
        }
        String m = manifest(store, ms, recovered);
        store.shutdown();
        writeFile(manifestPath, m);
    }

    static String entries(DLedgerMmapFileStore store) throws Exception {
        StringBuilder sb = new StringBuilder("[");
        MessageDigest sha = MessageDigest.getInstance("SHA-256");
        for (long i = store.getLedgerBeginIndex(); i >= 0 && i <= store.getLedgerEndIndex(); i++) {
            DLedgerEntry e = store.get(i);
            check(e != null && e.getIndex() == i, "get " + i);
            if (sb.length() > 1) {
                sb.append(',');
            }
            sb.append("{\"index\":").append(e.getIndex())
                .append(",\"term\":").append(e.getTerm())
                .append(",\"pos\":").append(e.getPos())
                .append(",\"size\":").append(e.getSize())
                .append(",\"magic\":").append(e.getMagic())
                .append(",\"channel\":").append(e.getChannel())
                .append(",\"bodyLength\":").append(e.getBody().length)
                .append(",\"bodySha256\":\"").append(hex(sha.digest(e.getBody()))).append("\"}");
        }
        return sb.append(']').toString();
    }

    static String manifest(DLedgerMmapFileStore store, MemberState ms, String recovered) throws Exception {
        StringBuilder sb = new StringBuilder("{");
        if (recovered != null) {
            sb.append("\"recovered\":").append(recovered).append(',');
        }
        sb.append("\"beginIndex\":").append(store.getLedgerBeginIndex())
            .append(",\"endIndex\":").append(store.getLedgerEndIndex())
            .append(",\"endTerm\":").append(store.getLedgerEndTerm())
            .append(",\"committedIndex\":").append(store.getCommittedIndex())
            .append(",\"committedPos\":").append(store.getCommittedPos())
            .append(",\"writePos\":").append(store.getWritePos())
            .append(",\"currTerm\":").append(ms.currTerm())
            .append(",\"voteFor\":").append(jsonString(ms.currVoteFor()))
            .append(",\"entries\":").append(entries(store))
            .append('}');
        return sb.toString();
    }

    static String jsonString(String s) {
        return s == null ? "null" : "\"" + s.replace("\\", "\\\\").replace("\"", "\\\"") + "\"";
    }

    static String hex(byte[] b) {
        StringBuilder sb = new StringBuilder();
        for (byte x : b) {
            sb.append(String.format("%02x", x & 0xFF));
        }
        return sb.toString();
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException("check failed: " + what);
        }
    }

    static void writeFile(String path, String text) throws IOException {
        File f = new File(path);
        if (f.getParentFile() != null) {
            f.getParentFile().mkdirs();
        }
        Files.write(f.toPath(), text.getBytes(StandardCharsets.UTF_8));
    }
}
