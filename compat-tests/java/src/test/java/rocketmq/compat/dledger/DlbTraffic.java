package rocketmq.compat.dledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.function.Supplier;
import rocketmq.compat.client.DriverRun;
import rocketmq.compat.dledger.DlbClient.Msg;
import rocketmq.compat.harness.Await;

/**
 * The client side of the DLedger store tests: {@code HaDriver} runs (official producers and push consumers in child
 * JVMs, 4.9.7 or 5.x) against the name server, and one "round" of traffic on a broker: a group resumes from its
 * committed offsets and a fresh group reads a topic from its first offset (both push consumers printing every
 * delivery), while new messages are sent; every message is then pulled and checked ({@link DlbLog#advance}).
 */
final class DlbTraffic {
    static final String CLIENT = "rocketmq-client";
    private static final Duration CONSUME = Duration.ofSeconds(120);
    /** A live consumer's own deadline: it is stopped by its stop file long before, once it got what it should. */
    private static final long LIVE_SECONDS = 600;

    private final String namesrv;
    private final Path drivers;

    DlbTraffic(String namesrv, Path drivers) {
        this.namesrv = namesrv;
        this.drivers = drivers;
    }

    /** Runs {@code HaDriver} with {@code steps} to its exit. */
    DriverRun run(String version, String serializeType, String what, String... steps) {
        DriverRun run = DriverRun.run("HaDriver", CLIENT, version, serializeType, drivers.resolve(what + "-" + System.nanoTime()),
            args(steps));
        System.out.println(what + ": " + run.summary());
        return run;
    }

    /** Starts {@code HaDriver} and returns at once. */
    DriverRun.Running start(String version, String serializeType, String what, String... steps) {
        return DriverRun.start("HaDriver", CLIENT, version, serializeType, drivers.resolve(what + "-" + System.nanoTime()),
            args(steps));
    }

    private String[] args(String... steps) {
        String[] args = new String[steps.length + 1];
        args[0] = namesrv;
        System.arraycopy(steps, 0, args, 1, steps.length);
        return args;
    }

    /**
     * {@code produce} of {@code count} keys {@code prefix-i} from 4 threads, every send required to be SEND_OK, with a
     * send timeout of 15 s: a Java broker on a busy 2-core machine sometimes takes longer than the usual 5 s.
     */
    static String produce(String topic, String prefix, int count) {
        return "produce:" + topic + ":" + prefix + ":" + count + ":4:0:-:true:15000";
    }

    /** Fails unless every step of {@code run} passed; prints the senders' failures and {@code diagnostics} if not. */
    static void assertAllOk(DriverRun run, Supplier<String> diagnostics, String... steps) {
        for (String step : steps) {
            if (!"OK".equals(run.result(step).get("status"))) {
                List<String> bad = new ArrayList<>();
                for (String prefix : List.of("WARM ", "FAIL ", "NOTOK ")) {
                    run.lines(prefix).stream().filter(w -> !prefix.equals("WARM ") || !w[1].equals("SEND_OK")).limit(10)
                        .forEach(w -> bad.add(prefix + String.join(" ", w)));
                }
                System.out.println("sends that were not SEND_OK:\n  " + String.join("\n  ", bad));
                System.out.println(diagnostics.get());
            }
            run.assertOk(step);
        }
    }

    /**
     * One round of traffic: {@code newMessages} (topic to count) sent by {@code sendClient}, then {@code moreSteps} in
     * the same driver; with {@code consumers}, {@code resumeGroup} and a fresh group consume {@code liveTopic} meanwhile.
     */
    record Round(String tag, Map<String, Integer> newMessages, String sendClient, String sendEncoding, List<String> moreSteps,
                 boolean consumers, String liveTopic, String resumeGroup, String liveClient, String liveEncoding) {
        /** Sends only (and {@code moreSteps}): no consumers. */
        static Round sendOnly(String tag, Map<String, Integer> newMessages, String sendClient, String sendEncoding,
                              List<String> moreSteps) {
            return new Round(tag, newMessages, sendClient, sendEncoding, moreSteps, false, null, null, null, null);
        }

        /** Sends, with {@code resumeGroup} and a fresh group consuming {@code liveTopic} (client {@code liveClient}). */
        static Round withConsumers(String tag, Map<String, Integer> newMessages, String sendClient, String sendEncoding,
                                   List<String> moreSteps, String liveTopic, String resumeGroup, String liveClient,
                                   String liveEncoding) {
            return new Round(tag, newMessages, sendClient, sendEncoding, moreSteps, true, liveTopic, resumeGroup, liveClient,
                liveEncoding);
        }

        /** The key prefix of this round's messages to {@code topic}: tag and the topic's position. */
        String prefix(List<String> topics, String topic) {
            return tag + "t" + topics.indexOf(topic);
        }
    }

    /**
     * One round on {@code node}, which must be the master. With consumers, {@code resumeGroup} (which must have
     * committed offsets) resumes on {@code liveTopic} and a fresh group starts there, both push consumers printing
     * every delivery. One producer run sends {@code newMessages} (every send SEND_OK) and runs {@code moreSteps}
     * (say, a fresh group's {@code consume} of another topic). Every message is pulled and checked
     * ({@link DlbLog#advance}; new ones at a commit-log offset of at least {@code minNewOffset}). The resuming group
     * must get exactly the messages from its committed offsets to the queue ends (nothing below them, nothing twice)
     * and commit the ends; the fresh group every message of the topic, old and new, once.
     */
    void round(DlbNode node, DlbLog log, Round r, long minNewOffset, Supplier<String> diagnostics) throws Exception {
        String what = r.tag() + " on " + node.label();
        long started = System.nanoTime();
        List<String> topics = log.topics();
        List<String> steps = new ArrayList<>();
        steps.add("warm:DlbWarm:60");
        Map<String, String> prefixTopics = new HashMap<>();
        for (Map.Entry<String, Integer> e : r.newMessages().entrySet()) {
            String prefix = r.prefix(topics, e.getKey());
            prefixTopics.put(prefix, e.getKey());
            steps.add(produce(e.getKey(), prefix, e.getValue()));
        }
        steps.addAll(r.moreSteps());
        String[] names = new String[steps.size()];
        for (int i = 0; i < steps.size(); i++) {
            names[i] = steps.get(i).substring(0, steps.get(i).indexOf(':')) + countSuffix(steps, i);
        }
        if (!r.consumers()) {
            DriverRun sent = run(r.sendClient(), r.sendEncoding(), "send-" + r.tag(), steps.toArray(String[]::new));
            assertAllOk(sent, diagnostics, names);
            log.advance(node.client(), okLines(sent, prefixTopics), prefixTopics, minNewOffset, what);
            System.out.printf("%s: %d sent (%d ms)%n", what, prefixCount(r), (System.nanoTime() - started) / 1_000_000);
            return;
        }
        Map<Integer, Long> committed = new TreeMap<>();
        for (int q = 0; q < log.queues(r.liveTopic()); q++) {
            committed.put(q, node.probe().committedOffset(r.resumeGroup(), r.liveTopic(), q));
            assertTrue(committed.get(q) >= 0, what + ": " + r.resumeGroup() + " has no committed offset for " + r.liveTopic() + "/" + q);
        }
        String freshGroup = "dlb_fresh_" + r.tag();
        Path stop = drivers.resolve("stop-" + r.tag());
        List<String[]> resumed;
        List<String[]> fresh;
        try (DriverRun.Running resume = start(r.liveClient(), r.liveEncoding(), "resume-" + r.tag(),
                 "consumeLive:" + r.liveTopic() + ":" + r.resumeGroup() + ":" + stop + ":" + LIVE_SECONDS);
             DriverRun.Running first = start(r.liveClient(), r.liveEncoding(), "fresh-" + r.tag(),
                 "consumeLive:" + r.liveTopic() + ":" + freshGroup + ":" + stop + ":" + LIVE_SECONDS)) {
            Supplier<String> all = () -> diagnostics.get() + "\n" + resume.describe(20) + "\n" + first.describe(20);
            DriverRun sent = run(r.sendClient(), r.sendEncoding(), "send-" + r.tag(), steps.toArray(String[]::new));
            assertAllOk(sent, all, names);
            log.advance(node.client(), okLines(sent, prefixTopics), prefixTopics, minNewOffset, what);

            Set<String> wantResumed = new HashSet<>();
            Set<String> wantFresh = new HashSet<>();
            for (Msg m : log.topic(r.liveTopic())) {
                wantFresh.add(m.key());
                if (m.queueOffset() >= committed.get(m.queueId())) {
                    wantResumed.add(m.key());
                }
            }
            Await.until(r.resumeGroup() + " resuming from " + committed + " and getting all " + wantResumed.size()
                + " messages from there, and a fresh group getting all " + wantFresh.size(), CONSUME,
                () -> keys(resume.lines("GOT ")).containsAll(wantResumed) && keys(first.lines("GOT ")).containsAll(wantFresh), all);
            Files.createFile(stop);
            DriverRun resumeRun = resume.await(CONSUME);
            DriverRun firstRun = first.await(CONSUME);
            resumeRun.assertOk("consumeLive");
            firstRun.assertOk("consumeLive");
            resumed = resumeRun.lines("GOT ");
            fresh = firstRun.lines("GOT ");
        }
        List<String> below = new ArrayList<>();
        for (String[] w : resumed) {
            if (Long.parseLong(w[2]) < committed.get(Integer.parseInt(w[1]))) {
                below.add(w[0] + "@" + w[1] + ":" + w[2]);
            }
        }
        assertTrue(below.isEmpty(), what + ": " + r.resumeGroup() + " got messages below its committed offsets " + committed
            + ": " + below.subList(0, Math.min(10, below.size())));
        assertEquals(keys(resumed).size(), resumed.size(), what + ": " + r.resumeGroup() + " got messages twice");
        assertEquals(keys(fresh).size(), fresh.size(), what + ": the fresh group got messages twice");
        Map<Integer, Long> ends = log.ends(r.liveTopic());
        Await.until(r.resumeGroup() + " committing the queue ends " + ends, CONSUME, () -> {
            Map<Integer, Long> c = new TreeMap<>();
            for (int q = 0; q < log.queues(r.liveTopic()); q++) {
                c.put(q, node.probe().committedOffset(r.resumeGroup(), r.liveTopic(), q));
            }
            return c;
        }, ends::equals, diagnostics);
        System.out.printf("%s: %s resumed at %s and got %d messages, a fresh group all %d of %s; %d sent (%d ms)%n", what,
            r.resumeGroup(), committed, resumed.size(), fresh.size(), r.liveTopic(), prefixCount(r), (System.nanoTime() - started) / 1_000_000);
    }

    /** The {@code OK} lines of the keys with one of {@code prefixTopics}' prefixes. */
    private static List<String[]> okLines(DriverRun sent, Map<String, String> prefixTopics) {
        List<String[]> ok = new ArrayList<>();
        for (String[] w : sent.lines("OK ")) {
            if (prefixTopics.containsKey(w[0].substring(0, w[0].lastIndexOf('-')))) {
                ok.add(w);
            }
        }
        return ok;
    }

    private static String countSuffix(List<String> steps, int i) {
        String name = steps.get(i).substring(0, steps.get(i).indexOf(':'));
        int n = 1;
        for (int j = 0; j < i; j++) {
            if (steps.get(j).startsWith(name + ":")) {
                n++;
            }
        }
        return n == 1 ? "" : "#" + n;
    }

    private static int prefixCount(Round r) {
        return r.newMessages().values().stream().mapToInt(Integer::intValue).sum();
    }

    static Set<String> keys(List<String[]> lines) {
        Set<String> keys = new HashSet<>();
        lines.forEach(w -> keys.add(w[0]));
        return keys;
    }

    /** topic to count, in order. */
    static Map<String, Integer> counts(Object... topicCount) {
        Map<String, Integer> out = new LinkedHashMap<>();
        for (int i = 0; i < topicCount.length; i += 2) {
            out.put((String) topicCount[i], (Integer) topicCount[i + 1]);
        }
        return out;
    }
}
