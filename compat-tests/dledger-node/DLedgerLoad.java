// Load and read-back through the real Java DLedger 0.3.1.2 client (io.openmessaging.storage.dledger.client.DLedgerClient),
// for the compat tests (compat-tests/java, package rocketmq.compat.dledger). It runs in a JVM of its own with the
// dledger classpath, because dledger 0.3.1.2 brings rocketmq-remoting 4.9.4 and the compat tests run 4.9.7.
//
//   append -g GROUP -p PEERS --from A --count N [--threads T] [--deadline-seconds S]
//       appends the entries of items A .. A+N-1 (bodies below), T appenders (default 4), each its own client;
//       appender t takes items A+t, A+t+T, ... in order, and retries an item until an answer has code 200.
//       Prints, one line each (flushed):
//         OK <item> <index> <term> <pos> <sha256 of body> <leaderId>   an answer with code 200: the acknowledged append
//         FAIL <item> <code> <leaderId>                        any other answer (the item is tried again)
//         DONE <acknowledged> <failed answers>                 all items acknowledged (exit 0)
//       Exit 3 if the deadline (default 150 s) passes first.
//   get -g GROUP -p PEERS --indexes FILE [--deadline-seconds S]
//       reads every index of FILE (one a line) with GET from the leader (the client finds it), retrying answers
//       other than 200, and prints
//         GOT <index> <term> <pos> <sha256 of body> <item from the body, or -1>
//         DONE <read> <failed answers>
//   transfer -g GROUP -p PEERS --leader L --to T --term N
//       one LEADERSHIP_TRANSFER (DLedgerClient.leadershipTransfer(L, T, N)), sent to L; prints
//         TRANSFER <code> <term of the answer>
//
// Body of item i: "dledger-compat item=<i> " then letters, 100 + (i * 7919) % 901 bytes in all (100 .. 1000), ASCII.
import io.openmessaging.storage.dledger.client.DLedgerClient;
import io.openmessaging.storage.dledger.entry.DLedgerEntry;
import io.openmessaging.storage.dledger.protocol.AppendEntryResponse;
import io.openmessaging.storage.dledger.protocol.DLedgerResponseCode;
import io.openmessaging.storage.dledger.protocol.GetEntriesResponse;
import io.openmessaging.storage.dledger.protocol.LeadershipTransferResponse;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

public class DLedgerLoad {
    private static final PrintStream OUT = new PrintStream(System.out, true, StandardCharsets.UTF_8);
    private static final String PREFIX = "dledger-compat item=";

    static byte[] body(long item) {
        int len = 100 + (int) ((item * 7919) % 901);
        StringBuilder sb = new StringBuilder(len);
        sb.append(PREFIX).append(item).append(' ');
        while (sb.length() < len) {
            sb.append((char) ('a' + (item + sb.length()) % 26));
        }
        sb.setLength(len);
        return sb.toString().getBytes(StandardCharsets.US_ASCII);
    }

    static long itemOf(byte[] body) {
        String s = new String(body, 0, Math.min(body.length, 48), StandardCharsets.US_ASCII);
        if (!s.startsWith(PREFIX)) {
            return -1;
        }
        int end = s.indexOf(' ', PREFIX.length());
        try {
            return Long.parseLong(s.substring(PREFIX.length(), end < 0 ? s.length() : end));
        } catch (NumberFormatException e) {
            return -1;
        }
    }

    static String sha256(byte[] data) {
        try {
            StringBuilder sb = new StringBuilder(64);
            for (byte b : MessageDigest.getInstance("SHA-256").digest(data)) {
                sb.append(String.format("%02x", b));
            }
            return sb.toString();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    private static void println(String line) {
        synchronized (OUT) {
            OUT.println(line);
        }
    }

    private static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0) {
            usage();
        }
        Map<String, String> opts = new HashMap<>();
        for (int i = 1; i < args.length; i += 2) {
            if (i + 1 >= args.length) {
                usage();
            }
            opts.put(args[i], args[i + 1]);
        }
        String group = require(opts, "-g");
        String peers = require(opts, "-p");
        long deadline = System.nanoTime() + Long.parseLong(opts.getOrDefault("--deadline-seconds", "150")) * 1_000_000_000L;
        int code;
        switch (args[0]) {
            case "append":
                code = append(group, peers, Long.parseLong(require(opts, "--from")), Long.parseLong(require(opts, "--count")),
                    Integer.parseInt(opts.getOrDefault("--threads", "4")), deadline);
                break;
            case "get":
                code = get(group, peers, Path.of(require(opts, "--indexes")), deadline);
                break;
            case "transfer":
                code = transfer(group, peers, require(opts, "--leader"), require(opts, "--to"),
                    Long.parseLong(require(opts, "--term")));
                break;
            default:
                usage();
                return;
        }
        OUT.flush();
        // Netty's threads are not daemons: leave without waiting for them.
        Runtime.getRuntime().halt(code);
    }

    private static int append(String group, String peers, long from, long count, int threads, long deadline)
        throws InterruptedException {
        AtomicLong acked = new AtomicLong();
        AtomicLong failed = new AtomicLong();
        List<Thread> appenders = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            final int self = t;
            Thread th = new Thread(() -> {
                DLedgerClient client = new DLedgerClient(group, peers);
                client.startup();
                try {
                    for (long item = from + self; item < from + count; item += threads) {
                        byte[] body = body(item);
                        String sha = sha256(body);
                        while (true) {
                            if (System.nanoTime() - deadline > 0) {
                                return;
                            }
                            AppendEntryResponse r = client.append(body);
                            if (r.getCode() == DLedgerResponseCode.SUCCESS.getCode()) {
                                println("OK " + item + " " + r.getIndex() + " " + r.getTerm() + " " + r.getPos() + " " + sha + " "
                                    + r.getLeaderId());
                                acked.incrementAndGet();
                                break;
                            }
                            failed.incrementAndGet();
                            println("FAIL " + item + " " + r.getCode() + " " + r.getLeaderId());
                            sleep(100);
                        }
                    }
                } finally {
                    client.shutdown();
                }
            }, "appender-" + t);
            th.start();
            appenders.add(th);
        }
        for (Thread th : appenders) {
            th.join();
        }
        if (acked.get() != count) {
            println("DEADLINE " + acked.get() + " " + failed.get());
            return 3;
        }
        println("DONE " + acked.get() + " " + failed.get());
        return 0;
    }

    private static int get(String group, String peers, Path indexFile, long deadline) throws Exception {
        List<Long> indexes = new ArrayList<>();
        for (String line : Files.readAllLines(indexFile)) {
            if (!line.isBlank()) {
                indexes.add(Long.parseLong(line.strip()));
            }
        }
        DLedgerClient client = new DLedgerClient(group, peers);
        client.startup();
        long failed = 0;
        long read = 0;
        Set<String> seenFailures = new HashSet<>();
        try {
            for (long index : indexes) {
                while (true) {
                    if (System.nanoTime() - deadline > 0) {
                        println("DEADLINE " + read + " " + failed);
                        return 3;
                    }
                    GetEntriesResponse r = client.get(index);
                    if (r.getCode() == DLedgerResponseCode.SUCCESS.getCode()) {
                        if (r.getEntries() == null || r.getEntries().size() != 1) {
                            println("GOT " + index + " -1 -1 none -1");
                        } else {
                            DLedgerEntry e = r.getEntries().get(0);
                            println("GOT " + e.getIndex() + " " + e.getTerm() + " " + e.getPos() + " " + sha256(e.getBody())
                                + " " + itemOf(e.getBody()));
                        }
                        read++;
                        break;
                    }
                    failed++;
                    if (seenFailures.add(r.getCode() + " " + r.getLeaderId())) {
                        println("GETFAIL " + index + " " + r.getCode() + " " + r.getLeaderId());
                    }
                    sleep(100);
                }
            }
        } finally {
            client.shutdown();
        }
        println("DONE " + read + " " + failed);
        return 0;
    }

    private static int transfer(String group, String peers, String leader, String transferee, long term) {
        DLedgerClient client = new DLedgerClient(group, peers);
        client.startup();
        try {
            LeadershipTransferResponse r = client.leadershipTransfer(leader, transferee, term);
            println("TRANSFER " + r.getCode() + " " + r.getTerm());
            return 0;
        } finally {
            client.shutdown();
        }
    }

    private static String require(Map<String, String> opts, String key) {
        String v = opts.get(key);
        if (v == null) {
            usage();
        }
        return v;
    }

    private static void usage() {
        System.err.println("usage: DLedgerLoad append -g GROUP -p PEERS --from A --count N [--threads T] [--deadline-seconds S]\n"
            + "       DLedgerLoad get -g GROUP -p PEERS --indexes FILE [--deadline-seconds S]\n"
            + "       DLedgerLoad transfer -g GROUP -p PEERS --leader L --to T --term N");
        System.exit(2);
    }
}
