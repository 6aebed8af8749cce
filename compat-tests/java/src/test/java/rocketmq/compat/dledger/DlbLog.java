package rocketmq.compat.dledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import rocketmq.compat.dledger.DlbClient.Msg;

/**
 * What a broker must hold: every message of the test's topics, queue by queue, as the broker returned it once
 * (topic, queue, queue offset, commit-log offset, store size, key, body intact). {@link #advance} pulls everything
 * again and requires the known messages unchanged and, after them, exactly the messages just sent.
 */
final class DlbLog {
    private final Map<String, Integer> queues;
    private final Map<String, List<Msg>> state = new LinkedHashMap<>();

    /** {@code queues}: topic to its queue count (the order is kept). */
    DlbLog(Map<String, Integer> queues) {
        this.queues = new LinkedHashMap<>(queues);
        queues.keySet().forEach(t -> state.put(t, List.of()));
    }

    /** A copy holding the same messages (for a second store copied from the same one). */
    DlbLog copy() {
        DlbLog c = new DlbLog(queues);
        c.state.putAll(state);
        return c;
    }

    List<String> topics() {
        return new ArrayList<>(queues.keySet());
    }

    int queues(String topic) {
        return queues.get(topic);
    }

    List<Msg> topic(String topic) {
        return state.get(topic);
    }

    List<Msg> all() {
        List<Msg> out = new ArrayList<>();
        state.values().forEach(out::addAll);
        return out;
    }

    int size() {
        return all().size();
    }

    /** Messages per queue of {@code topic} (its queue ends). */
    Map<Integer, Long> ends(String topic) {
        Map<Integer, Long> ends = new TreeMap<>();
        for (int q = 0; q < queues.get(topic); q++) {
            ends.put(q, 0L);
        }
        for (Msg m : state.get(topic)) {
            ends.merge(m.queueId(), 1L, Long::sum);
        }
        return ends;
    }

    /** The highest commit-log offset of any message held (-1: none). */
    long maxOffset() {
        return all().stream().mapToLong(Msg::commitLogOffset).max().orElse(-1);
    }

    /**
     * Pulls every queue of every topic from {@code client} and checks it against what is known plus what was just
     * sent ({@code sent}: the produce steps' {@code OK key queueId queueOffset brokerName} lines, with the topic of
     * each key prefix in {@code prefixTopics}): the known messages come back unchanged, in their places; after them
     * in each queue come exactly the messages sent to it, at the queue offsets their send results named, intact,
     * each at a commit-log offset of at least {@code minNewOffset} and above every known one. Then this holds
     * what was pulled.
     */
    void advance(DlbClient client, List<String[]> sent, Map<String, String> prefixTopics, long minNewOffset, String what)
        throws Exception {
        Map<String, String[]> sentByKey = new HashMap<>();
        for (String[] w : sent) {
            String[] prev = sentByKey.put(w[0], w);
            assertTrue(prev == null, what + ": " + w[0] + " was SEND_OK twice");
        }
        long knownMax = maxOffset();
        Map<String, List<Msg>> pulled = new LinkedHashMap<>();
        int news = 0;
        for (String topic : queues.keySet()) {
            List<Msg> got = client.pullTopic(topic, queues.get(topic));
            Map<Integer, List<Msg>> knownByQueue = byQueue(state.get(topic));
            Map<Integer, List<Msg>> gotByQueue = byQueue(got);
            for (int q = 0; q < queues.get(topic); q++) {
                List<Msg> known = knownByQueue.getOrDefault(q, List.of());
                List<Msg> now = gotByQueue.getOrDefault(q, List.of());
                String queue = topic + "/" + q;
                assertTrue(now.size() >= known.size(), what + ": " + queue + " holds " + now.size() + " messages, "
                    + known.size() + " were there before");
                for (int i = 0; i < known.size(); i++) {
                    int at = i;
                    assertEquals(known.get(i), now.get(i), () -> what + ": message " + at + " of " + queue + " changed");
                }
                for (Msg m : now.subList(known.size(), now.size())) {
                    news++;
                    String[] w = sentByKey.remove(m.key());
                    assertTrue(w != null, what + ": " + m.where() + " was not sent now (or came twice)");
                    assertEquals(topic, prefixTopics.get(m.key().substring(0, m.key().lastIndexOf('-'))),
                        what + ": topic of " + m.where());
                    assertEquals(Integer.parseInt(w[1]) + ":" + Long.parseLong(w[2]), m.queueId() + ":" + m.queueOffset(),
                        what + ": queue and offset of " + m.key() + ", as its send result named them, then as pulled");
                    assertTrue(m.intact(), what + ": the body of " + m.where() + " is not the one sent");
                    assertTrue(m.commitLogOffset() >= minNewOffset && m.commitLogOffset() > knownMax, what + ": " + m.where()
                        + " is not past the offsets known before (" + knownMax + ") and at least " + minNewOffset);
                }
            }
            pulled.put(topic, got);
        }
        assertTrue(sentByKey.isEmpty(), what + ": " + sentByKey.size() + " SEND_OK messages are not on the broker, e.g. "
            + sentByKey.keySet().stream().limit(10).toList());
        state.putAll(pulled);
        System.out.println(what + ": " + size() + " messages pulled from 0, " + news + " of them new, all in place");
    }

    private static Map<Integer, List<Msg>> byQueue(List<Msg> msgs) {
        Map<Integer, List<Msg>> out = new TreeMap<>();
        for (Msg m : msgs) {
            out.computeIfAbsent(m.queueId(), q -> new ArrayList<>()).add(m);
        }
        return out;
    }
}
