package rocketmq.compat.dledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.function.Supplier;
import org.apache.rocketmq.common.message.MessageExt;
import rocketmq.compat.dledger.DlbClient.Msg;
import rocketmq.compat.harness.Await;

/** Checks the DLedger store tests share: messages by key, DLedger entries against the messages held, offsets. */
final class DlbChecks {
    private DlbChecks() {
    }

    /** QUERY_MESSAGE finds each of {@code msgs} by its key, exactly once, at its offset (the index may lag a moment). */
    static void assertQueries(DlbNode node, List<Msg> msgs, String what, Supplier<String> diagnostics) throws Exception {
        assertQueries(node, msgs, -1, what, diagnostics);
    }

    /**
     * As {@link #assertQueries(DlbNode, List, String, Supplier)}, except that a message at a commit-log offset up to
     * {@code crashHorizon} may be found not at all, or more than once (every hit the same message; never a wrong
     * one). That is what a Java broker does with keys stored before a crash: its index service deletes, at the start
     * after a crash, every index file written since its last index checkpoint, and in DLedger mode does not dispatch
     * what the consume queues hold again (4.9.7 not at all; 5.3.3 from a recent segment on, so those keys are
     * indexed again, some twice: its recovery truncates the consume queues below the real end and the dispatch puts
     * the truncated ones back, indexing them once more).
     */
    static void assertQueries(DlbNode node, List<Msg> msgs, long crashHorizon, String what, Supplier<String> diagnostics)
        throws Exception {
        long t = System.nanoTime();
        DlbClient.Queried q = Await.until(what + ": each of " + msgs.size() + " messages found by its key, once"
                + (crashHorizon >= 0 ? " (or, if stored at or below offset " + crashHorizon + " before a crash, not at all or"
                    + " more than once)" : ""),
            DlbNode.REGISTER, () -> node.client().queryEach(msgs),
            r -> r.problems().isEmpty() && r.notFound().stream().allMatch(m -> m.commitLogOffset() <= crashHorizon)
                && r.repeated().stream().allMatch(m -> m.commitLogOffset() <= crashHorizon), diagnostics);
        System.out.printf("%s: %d of %d messages found by key once%s%s (%d ms)%n", what,
            msgs.size() - q.notFound().size() - q.repeated().size(), msgs.size(),
            q.notFound().isEmpty() ? "" : ", " + q.notFound().size() + " (stored before a crash) not at all",
            q.repeated().isEmpty() ? "" : ", " + q.repeated().size() + " (stored before a crash) more than once",
            (System.nanoTime() - t) / 1_000_000);
    }

    /**
     * The DLedger data segments of a stopped (or killed) broker: entries laid out as DLedger 0.3.1.2 writes them
     * ({@link DlbStore#entries}), the first at {@code divided} with index 0, and the records of the log's topics in
     * them exactly the messages held at or past {@code divided} (record offset = entry pos + 48; same key, topic,
     * queue and queue offset). Returns the entries.
     */
    static List<DlbStore.Entry> assertDLedgerHolds(DlbNode node, DlbLog log, long divided, String what) {
        List<DlbStore.Entry> entries = DlbStore.entries(node.dataDir(), DlbNode.SEGMENT);
        assertTrue(!entries.isEmpty(), what + ": no DLedger entry in " + node.dataDir());
        assertEquals(divided, entries.get(0).pos(), what + ": the first DLedger entry's pos");
        assertEquals(0, entries.get(0).index(), what + ": the first DLedger entry's index");
        TreeMap<Long, DlbStore.Entry> byOffset = DlbStore.byOffset(entries, log.topics());
        Map<Long, Msg> held = new HashMap<>();
        for (Msg m : log.all()) {
            if (m.commitLogOffset() >= divided) {
                held.put(m.commitLogOffset(), m);
            }
        }
        assertEquals(new TreeMap<>(held).keySet(), byOffset.keySet(), what + ": the commit-log offsets of the messages held "
            + "at or past " + divided + ", then the DLedger entries' pos + 48");
        for (Map.Entry<Long, DlbStore.Entry> e : byOffset.entrySet()) {
            Msg m = held.get(e.getKey());
            MessageExt r = e.getValue().record();
            assertEquals(m.key() + "@" + m.topic() + "/" + m.queueId() + ":" + m.queueOffset(),
                r.getKeys() + "@" + r.getTopic() + "/" + r.getQueueId() + ":" + r.getQueueOffset(),
                what + ": the record of " + e.getValue().describe());
        }
        Map<Long, Integer> terms = new TreeMap<>();
        entries.forEach(e -> terms.merge(e.term(), 1, Integer::sum));
        System.out.printf("%s: %d DLedger entries from pos %d (index 0 .. %d; entries per term %s), %d of them the test's messages%n",
            what, entries.size(), divided, entries.get(entries.size() - 1).index(), terms, byOffset.size());
        return entries;
    }

    /** The group's committed offsets of queues 0 .. queues-1 (-1: none). */
    static Map<Integer, Long> committed(DlbNode node, String group, String topic, int queues) throws Exception {
        Map<Integer, Long> c = new TreeMap<>();
        for (int q = 0; q < queues; q++) {
            c.put(q, node.probe().committedOffset(group, topic, q));
        }
        return c;
    }

    /** Per queue: the number of messages of {@code topic} whose key starts with {@code prefix-}. */
    static Map<Integer, Long> countsOf(DlbLog log, String topic, String prefix) {
        Map<Integer, Long> out = new TreeMap<>();
        for (Msg m : log.topic(topic)) {
            if (m.key().startsWith(prefix + "-")) {
                out.merge(m.queueId(), 1L, Long::sum);
            }
        }
        return out;
    }
}
