package rocketmq.compat.dledger;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Supplier;
import rocketmq.compat.client.DriverRun;
import rocketmq.compat.harness.Await;

/**
 * What the DLedger broker tests read from {@code HaDriver}'s output: {@code OK key queueId queueOffset brokerName
 * storeHost} per SEND_OK, {@code GOT key queueId queueOffset brokerName storeHost} per delivery.
 */
final class SendLines {
    private SendLines() {
    }

    static Set<String> keys(List<String[]> lines) {
        Set<String> keys = new HashSet<>();
        lines.forEach(w -> keys.add(w[0]));
        return keys;
    }

    /** The SEND_OK answers whose message {@code storeHost} stored (the master that answered). */
    static long storedBy(List<String[]> okLines, String storeHost) {
        return okLines.stream().filter(w -> w.length > 4 && w[4].equals(storeHost)).count();
    }

    /**
     * Waits until the consumer got every key of {@code okLines}; on a timeout names the missing ones (up to 20, with
     * the queue, offset and master of their SEND_OK) and how many each master answered.
     */
    static void awaitConsumed(List<String[]> okLines, DriverRun.Running consumer, Duration timeout, Supplier<String> diagnostics) {
        Set<String> ok = keys(okLines);
        Await.until("the consumer getting all " + ok.size() + " SEND_OK messages", timeout,
            () -> keys(consumer.lines("GOT ")).containsAll(ok), () -> missing(okLines, consumer.lines("GOT ")) + "\n" + diagnostics.get());
    }

    /** A description of the SEND_OK messages not among the deliveries (empty if none). */
    static String missing(List<String[]> okLines, List<String[]> gotLines) {
        Set<String> got = keys(gotLines);
        List<String> examples = new ArrayList<>();
        Map<String, Integer> byMaster = new TreeMap<>();
        Map<String, Integer> byQueue = new TreeMap<>();
        int missing = 0;
        for (String[] w : okLines) {
            if (!got.contains(w[0])) {
                missing++;
                byMaster.merge(w.length > 4 ? w[4] : "?", 1, Integer::sum);
                byQueue.merge(w[1], 1, Integer::sum);
                if (examples.size() < 20) {
                    examples.add(String.join(" ", w));
                }
            }
        }
        if (missing == 0) {
            return "";
        }
        Map<String, Long> highestGot = new LinkedHashMap<>();
        for (String[] w : gotLines) {
            highestGot.merge(w[1], Long.parseLong(w[2]), Math::max);
        }
        return missing + " SEND_OK messages not consumed, by storing master " + byMaster + ", by queue " + byQueue
            + "; highest offset delivered per queue " + new TreeMap<>(highestGot) + "; e.g. (key queue offset broker storeHost) "
            + examples;
    }
}
