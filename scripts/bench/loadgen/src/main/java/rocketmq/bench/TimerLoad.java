package rocketmq.bench;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.LongAdder;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * 5.x timer messages (workload k): N messages whose delivery times ({@code Message.setDeliverTimeMs},
 * the TIMER_DELIVER_MS property) are spread uniformly at random over a window of W seconds that opens
 * L seconds after sending starts, sent as fast as the broker takes them (async, a bounded number in
 * flight; a send refused or failed is sent again, up to 10 times), and a push consumer in this JVM that records, per message, receive time minus due time.
 *
 * <p>Each message carries its sequence number and due time as user properties, so the consumer counts
 * missing and duplicate deliveries and early ones. The lead L keeps every due time after its send (a
 * message sent after its due time is stored as a plain one; such sends are counted): so when the send
 * phase ends every timer is pending, which is when the broker's resident set is read for "pending
 * timers at their peak". The broker's CPU time is taken over the whole run (first send to last
 * delivery), enqueue and delivery, and divided by the number of timers.
 *
 * <p>A warm-up first sends timer messages due 1-3 s later (property bench_warm) for the given seconds and
 * waits for their delivery (at most N/10 of them), so a Java broker's JIT has compiled its timer paths before the measured
 * send; they are left out of every figure.
 */
final class TimerLoad {
    private static final String SEQ = "bench_seq";
    private static final String DUE = "bench_due";
    private static final String WARM = "bench_warm";

    private final String topic;
    private final int messages;
    private final long windowMs;
    private final long leadMs;
    private final int inflight;
    private final long precisionMs;
    private final byte[] body;

    /** per sequence number: 1 once its send was answered SEND_OK */
    private final AtomicIntegerArray sentOk;
    /** per sequence number: how many times the consumer got it */
    private final AtomicIntegerArray deliveries;
    /** per sequence number: receive time minus due time of the first delivery, ms */
    private final int[] lateness;
    /** per sequence number: due time minus the window's start, ms */
    private final int[] dueOffset;
    private final LongAdder ok = new LongAdder();
    private final LongAdder notOk = new LongAdder();
    /** measured sends answered with an exception (each sent again) */
    private final LongAdder failed = new LongAdder();
    /** measured timers not stored after 10 attempts */
    private final LongAdder gaveUp = new LongAdder();
    private final java.util.Queue<Integer> retries = new java.util.concurrent.ConcurrentLinkedQueue<>();
    private final LongAdder sentAfterDue = new LongAdder();
    private final LongAdder received = new LongAdder();
    private final LongAdder receivedUnique = new LongAdder();
    private final LongAdder duplicates = new LongAdder();
    private final LongAdder foreign = new LongAdder();
    private final LongAdder warmOk = new LongAdder();
    private final LongAdder warmReceived = new LongAdder();
    private final Map<String, LongAdder> errors = new ConcurrentHashMap<>();
    /** send latency of the measured sends, microseconds */
    private final Recorder sendLatency = new Recorder(3);
    private final Semaphore window;
    /** measured deliveries per second since the window opened (second 0: the first due second) */
    private final AtomicIntegerArray deliveredPerSecond;
    /** when the due window opens (epoch ms); set before the first measured send */
    private volatile long windowStart = Long.MAX_VALUE;
    /** when the last send was answered (System.nanoTime) */
    private volatile long lastAnswer = System.nanoTime();

    private TimerLoad(Args a) {
        topic = a.str("topic", "bench_timer");
        messages = a.integer("messages", 150_000);
        windowMs = a.lng("window-s", 120) * 1000;
        leadMs = a.lng("lead-s", 30) * 1000;
        inflight = a.integer("inflight", 1024);
        precisionMs = a.lng("precision-ms", 1000);
        int size = a.integer("size", 128);
        body = new byte[size];
        Random r = new Random(42);
        String alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        for (int i = 0; i < size; i++) {
            body[i] = (byte) alnum.charAt(r.nextInt(alnum.length()));
        }
        sentOk = new AtomicIntegerArray(messages);
        deliveries = new AtomicIntegerArray(messages);
        lateness = new int[messages];
        dueOffset = new int[messages];
        window = new Semaphore(inflight);
        deliveredPerSecond = new AtomicIntegerArray((int) (windowMs / 1000) + a.integer("drain", 60) + 10);
    }

    static void run(Args a) throws Exception {
        new TimerLoad(a).execute(a);
    }

    private void execute(Args a) throws Exception {
        String namesrv = a.str("namesrv");
        int warmup = a.integer("warmup", 5);
        int drain = a.integer("drain", 60);
        long clk = a.lng("clk-tck", 100);
        int serverCpu = a.integer("server-cpu", 0), clientCpu = a.integer("client-cpu", 1);
        Proc broker = new Proc(a.lng("broker-pid", -1), clk);
        Proc self = new Proc(Proc.self(), clk);
        broker.startSampler();

        DefaultMQProducer producer = new DefaultMQProducer("timer_producer");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("bench-" + Proc.self());
        producer.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
        producer.setDefaultTopicQueueNums(a.integer("queues", 8));
        producer.start();
        Prime.topic(producer, topic);

        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer("timer_consumer");
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("bench-" + Proc.self());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
            long now = System.currentTimeMillis();
            for (MessageExt m : msgs) {
                delivered(m, now);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        BrokerLoad.awaitQueues(consumer, topic, received::sum, 1);

        // warm-up: timers due 1-3 s after their send, then wait for them all
        Random rnd = new Random(7);
        BrokerLoad.log("warm-up %d s: timer messages due 1-3 s after their send", warmup);
        // at most a tenth of the measured count, so the warm-up's deliveries are over in seconds
        long warmEnd = System.nanoTime() + warmup * 1_000_000_000L;
        for (int i = 0; i < messages / 10 && System.nanoTime() < warmEnd; i++) {
            Message m = new Message(topic, body);
            m.putUserProperty(WARM, "1");
            m.setDeliverTimeMs(System.currentTimeMillis() + 1000 + rnd.nextInt(2000));
            sendAsync(producer, m, -1, false);
        }
        awaitAllAnswered();
        long warmDeadline = System.nanoTime() + 30_000_000_000L;
        while (warmReceived.sum() < warmOk.sum() && System.nanoTime() < warmDeadline) {
            Thread.sleep(50);
        }
        BrokerLoad.log("warm-up: %d timers sent, %d delivered", warmOk.sum(), warmReceived.sum());
        Thread.sleep(1000);

        // the measured run: its CPU and core readings start here
        double bcpu0 = broker.cpuSeconds(), scpu0 = self.cpuSeconds();
        long rssStart = broker.statusKb("VmRSS"), anonStart = broker.statusKb("RssAnon");
        long[] sc0 = Proc.coreJiffies(serverCpu), cc0 = Proc.coreJiffies(clientCpu);
        long t0 = System.nanoTime();
        long start = System.currentTimeMillis();
        windowStart = start + leadMs;
        BrokerLoad.log("sending %,d timers due uniformly over %d s from %d s on (%d in flight, %d B)",
            messages, windowMs / 1000, leadMs / 1000, inflight, body.length);
        // a send the broker refuses (a Java broker's "broker busy" flow control) or that fails is sent again
        // (up to 10 times in all), so both brokers end up holding the same N timers
        byte[] attempts = new byte[messages];
        int next = 0;
        while (true) {
            Integer retry = retries.poll();
            int seq;
            if (retry != null) {
                seq = retry;
            } else if (next < messages) {
                seq = next++;
                dueOffset[seq] = (int) (rnd.nextDouble() * windowMs);
            } else if ((window.availablePermits() < inflight || !retries.isEmpty())
                && System.nanoTime() - lastAnswer < 60_000_000_000L) {
                Thread.sleep(1); // the last answers may still bring retries (the client times a send out after 3 s)
                continue;
            } else {
                break;
            }
            if (++attempts[seq] > 10) {
                gaveUp.increment();
                continue;
            }
            long due = windowStart + dueOffset[seq];
            Message m = new Message(topic, body);
            m.putUserProperty(SEQ, Integer.toString(seq));
            m.putUserProperty(DUE, Long.toString(due));
            m.setDeliverTimeMs(due);
            sendAsync(producer, m, seq, System.currentTimeMillis() >= due);
        }
        double sendSecs = (System.nanoTime() - t0) / 1e9;
        double bcpuSend = broker.cpuSeconds() - bcpu0, scpuSend = self.cpuSeconds() - scpu0;
        long[] scSend = Proc.coreJiffies(serverCpu), ccSend = Proc.coreJiffies(clientCpu);
        long rssSendEnd = broker.statusKb("VmRSS"), anonSendEnd = broker.statusKb("RssAnon");
        long receivedAtSendEnd = receivedUnique.sum();
        Histogram send = sendLatency.getIntervalHistogram();
        BrokerLoad.log("sent %,d timers in %.1f s (%.0f msg/s), %d sends failed and retried, %d given up, %d not SEND_OK; broker RSS %,d kB",
            ok.sum(), sendSecs, ok.sum() / sendSecs, failed.sum(), gaveUp.sum(), notOk.sum(), rssSendEnd);

        // the last moment before the first due time: every timer is pending (the broker's own enqueue,
        // asynchronous in Java's, has had the lead's rest to finish)
        long untilFirstDue = windowStart - precisionMs - 500 - System.currentTimeMillis();
        if (untilFirstDue > 0) {
            Thread.sleep(untilFirstDue);
        }
        long rssFirstDue = broker.statusKb("VmRSS"), anonFirstDue = broker.statusKb("RssAnon");
        long receivedAtFirstDue = receivedUnique.sum();

        // deliveries: until every stored timer has come, or the drain after the last due time is over
        long expected = ok.sum() + notOk.sum();
        long lastDue = windowStart + windowMs;
        long nextLog = System.currentTimeMillis() + 10_000;
        while (receivedUnique.sum() < expected && System.currentTimeMillis() < lastDue + drain * 1000L) {
            Thread.sleep(100);
            if (System.currentTimeMillis() >= nextLog) {
                nextLog += 10_000;
                BrokerLoad.log("%,d of %,d delivered (%,d pending), broker RSS %,d kB", receivedUnique.sum(), expected,
                    expected - receivedUnique.sum(), broker.statusKb("VmRSS"));
            }
        }
        // a late duplicate would come soon after the original: give it 2 s
        Thread.sleep(2000);
        double runSecs = (System.nanoTime() - t0) / 1e9;
        double bcpu = broker.cpuSeconds() - bcpu0, scpu = self.cpuSeconds() - scpu0;
        long[] sc1 = Proc.coreJiffies(serverCpu), cc1 = Proc.coreJiffies(clientCpu);
        broker.sample();
        long rssEnd = broker.statusKb("VmRSS"), anonEnd = broker.statusKb("RssAnon");

        Map<String, Object> out = new LinkedHashMap<>();
        out.put("mode", "timer");
        out.put("topic", topic);
        out.put("queues", producer.fetchPublishMessageQueues(topic).size());
        out.put("size", body.length);
        out.put("inflight", inflight);
        out.put("messages", messages);
        out.put("window_s", windowMs / 1000);
        out.put("lead_s", leadMs / 1000);
        out.put("precision_ms", precisionMs);
        out.put("warmup_timers", warmOk.sum());
        out.put("warmup_delivered", warmReceived.sum());
        out.put("send_ok", ok.sum());
        out.put("send_not_ok", notOk.sum());
        out.put("send_failed", failed.sum());
        out.put("send_given_up", gaveUp.sum());
        out.put("sent_after_due", sentAfterDue.sum());
        out.put("send_s", sendSecs);
        out.put("enqueue_tps", ok.sum() / sendSecs);
        out.put("send_latency_ms", Json.percentilesMs(send, 1000.0));
        out.put("run_s", runSecs);
        out.put("expected_total", expected);
        out.put("received_total", received.sum());
        out.put("received_unique", receivedUnique.sum());
        out.put("delivered_before_first_due_window", receivedAtFirstDue);
        out.put("delivered_during_send", receivedAtSendEnd);
        out.putAll(deliveryFigures());
        out.put("foreign_received", foreign.sum());
        out.put("broker_cpu_s", bcpu);
        out.put("broker_cpu_send_s", bcpuSend);
        out.put("broker_cpu_delivery_s", bcpu - bcpuSend);
        out.put("broker_cpu_us_per_timer", ok.sum() > 0 ? bcpu / ok.sum() * 1e6 : Double.NaN);
        out.put("broker_cpu_us_per_timer_send", ok.sum() > 0 ? bcpuSend / ok.sum() * 1e6 : Double.NaN);
        out.put("broker_cpu_util_send", bcpuSend / sendSecs);
        out.put("broker_cpu_util", bcpu / runSecs);
        out.put("loadgen_cpu_util_send", scpuSend / sendSecs);
        out.put("loadgen_cpu_util", scpu / runSecs);
        out.put("server_core_busy_send", Proc.busyFraction(sc0, scSend));
        out.put("client_core_busy_send", Proc.busyFraction(cc0, ccSend));
        out.put("server_core_busy", Proc.busyFraction(sc0, sc1));
        out.put("client_core_busy", Proc.busyFraction(cc0, cc1));
        out.put("broker_vmhwm_kb", broker.statusKb("VmHWM"));
        out.put("broker_peak_anon_kb", broker.peakAnonKb());
        out.put("broker_rss_send_start_kb", rssStart);
        out.put("broker_rss_send_end_kb", rssSendEnd);
        out.put("broker_rss_first_due_kb", rssFirstDue);
        out.put("broker_rss_end_kb", rssEnd);
        out.put("broker_anon_send_start_kb", anonStart);
        out.put("broker_anon_send_end_kb", anonSendEnd);
        out.put("broker_anon_first_due_kb", anonFirstDue);
        out.put("broker_anon_end_kb", anonEnd);
        out.put("send_errors_whole_run", topErrors());
        Files.writeString(Path.of(a.str("out")), Json.write(out) + "\n", StandardCharsets.UTF_8);
        @SuppressWarnings("unchecked")
        Map<String, Object> late = (Map<String, Object>) out.get("lateness_ms");
        BrokerLoad.log("%.0f timers/s enqueued; delivered %,d of %,d (missing %s, duplicates %s, early %s); lateness p50 %s p99 %s max %s ms;"
                + " broker %.1f us CPU per timer", ok.sum() / sendSecs, receivedUnique.sum(), expected, out.get("missing"),
            out.get("duplicates"), out.get("early"), late.get("p50"), late.get("p99"), late.get("max"),
            (Double) out.get("broker_cpu_us_per_timer"));
        Main.shutdownQuietly(consumer::shutdown, producer::shutdown);
    }

    /** The consumer's side of one message: a measured timer (by sequence number), a warm-up one, or the priming message. */
    private void delivered(MessageExt m, long now) {
        received.increment();
        if (m.getUserProperty(WARM) != null) {
            warmReceived.increment();
            return;
        }
        String seqText = m.getUserProperty(SEQ), dueText = m.getUserProperty(DUE);
        if (seqText == null || dueText == null) {
            foreign.increment();
            return;
        }
        int seq;
        long due;
        try {
            seq = Integer.parseInt(seqText);
            due = Long.parseLong(dueText);
        } catch (NumberFormatException e) {
            foreign.increment();
            return;
        }
        if (seq < 0 || seq >= messages) {
            foreign.increment();
            return;
        }
        if (deliveries.getAndIncrement(seq) == 0) {
            lateness[seq] = (int) Math.max(Integer.MIN_VALUE, Math.min(Integer.MAX_VALUE, now - due));
            receivedUnique.increment();
            long sec = Math.floorDiv(now - windowStart, 1000L);
            if (sec >= 0 && sec < deliveredPerSecond.length()) {
                deliveredPerSecond.incrementAndGet((int) sec);
            }
        } else {
            duplicates.increment();
        }
    }

    /**
     * Lateness over the first delivery of every timer (signed: the brokers round a due time down to
     * their precision, Java's HookUtils as ours, so a timer may come up to one precision early), the
     * early, missing and duplicate counts, and the lateness per tenth of the window by due time (does it
     * grow as the backlog is worked off?).
     */
    private Map<String, Object> deliveryFigures() {
        Map<String, Object> out = new LinkedHashMap<>();
        long missing = 0, early = 0, earlyBeyond = 0, deliveredNotSent = 0, lateBeyond = 0;
        // the timers more than a precision (+100 ms) late, by due second: a slot delivered late shows as one
        Map<Integer, Integer> lateBySecond = new java.util.TreeMap<>();
        int[] all = new int[messages];
        int n = 0;
        List<List<Integer>> tenths = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            tenths.add(new ArrayList<>());
        }
        for (int seq = 0; seq < messages; seq++) {
            boolean got = deliveries.get(seq) > 0;
            if (sentOk.get(seq) == 0) {
                // a failed send (or not SEND_OK) the broker may still have stored: counted, not measured
                if (got) {
                    deliveredNotSent++;
                }
                continue;
            }
            if (!got) {
                missing++;
                continue;
            }
            int l = lateness[seq];
            all[n++] = l;
            if (l > precisionMs + 100) {
                lateBeyond++;
                lateBySecond.merge(dueOffset[seq] / 1000, 1, Integer::sum);
            }
            if (l < 0) {
                early++;
                if (l < -precisionMs) {
                    earlyBeyond++;
                }
            }
            tenths.get((int) Math.min(9, dueOffset[seq] * 10L / windowMs)).add(l);
        }
        int[] sorted = Arrays.copyOf(all, n);
        Arrays.sort(sorted);
        out.put("lateness_ms", percentiles(sorted));
        out.put("early", early);
        out.put("early_beyond_precision", earlyBeyond);
        out.put("late_beyond_precision", lateBeyond);
        Map<String, Object> worst = new LinkedHashMap<>();
        lateBySecond.entrySet().stream().sorted((x, y) -> Integer.compare(y.getValue(), x.getValue())).limit(10)
            .forEach(e -> worst.put("due_s_" + e.getKey(), e.getValue()));
        out.put("late_beyond_precision_by_due_second", worst);
        out.put("missing", missing);
        out.put("duplicates", duplicates.sum());
        out.put("delivered_but_send_failed", deliveredNotSent);
        List<Object> byTenth = new ArrayList<>();
        for (int i = 0; i < 10; i++) {
            int[] t = tenths.get(i).stream().mapToInt(Integer::intValue).sorted().toArray();
            Map<String, Object> p = percentiles(t);
            p.put("due_from_s", i * windowMs / 10000.0);
            byTenth.add(p);
        }
        out.put("lateness_by_tenth_of_window", byTenth);
        out.putAll(backlogFigures());
        return out;
    }

    /**
     * The second-by-second picture from the window's opening: timers due in each second against timers
     * delivered in it, the overdue backlog (due so far minus delivered so far) at its peak and when, and the
     * longest run of seconds in which nothing came while timers were overdue: a broker that falls behind or
     * stalls shows here, where lateness percentiles only say that it did.
     */
    private Map<String, Object> backlogFigures() {
        int secs = deliveredPerSecond.length();
        int[] due = new int[secs];
        for (int seq = 0; seq < messages; seq++) {
            if (sentOk.get(seq) != 0) {
                due[Math.min(secs - 1, dueOffset[seq] / 1000)]++;
            }
        }
        long dueSoFar = 0, deliveredSoFar = 0, peak = 0;
        int peakAt = -1, run = 0, longest = 0, longestEnd = -1;
        List<List<Integer>> perSecond = new ArrayList<>();
        for (int t = 0; t < secs; t++) {
            int d = deliveredPerSecond.get(t);
            dueSoFar += due[t];
            deliveredSoFar += d;
            // overdue at the end of second t: due by its end, not yet delivered (a timer due in second t
            // comes up to a precision later by design, so one second's worth is the normal level)
            long overdue = dueSoFar - deliveredSoFar;
            if (overdue > peak) {
                peak = overdue;
                peakAt = t;
            }
            run = d == 0 && overdue > 0 ? run + 1 : 0;
            if (run > longest) {
                longest = run;
                longestEnd = t;
            }
            perSecond.add(List.of(t, due[t], d));
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("peak_overdue_timers", peak);
        out.put("peak_overdue_at_s", peakAt);
        out.put("longest_delivery_gap_s", longest);
        out.put("longest_delivery_gap_ends_at_s", longestEnd);
        out.put("due_and_delivered_per_second", perSecond);
        return out;
    }

    private static Map<String, Object> percentiles(int[] sorted) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("count", sorted.length);
        if (sorted.length == 0) {
            return m;
        }
        m.put("min", sorted[0]);
        m.put("p50", at(sorted, 50));
        m.put("p99", at(sorted, 99));
        m.put("p999", at(sorted, 99.9));
        m.put("max", sorted[sorted.length - 1]);
        m.put("mean", Arrays.stream(sorted).asLongStream().sum() / (double) sorted.length);
        return m;
    }

    /** the nearest-rank percentile */
    private static int at(int[] sorted, double pct) {
        int rank = (int) Math.ceil(pct / 100.0 * sorted.length);
        return sorted[Math.max(0, Math.min(sorted.length - 1, rank - 1))];
    }

    /** One async send within the in-flight bound; seq -1 is a warm-up message (not retried). */
    private void sendAsync(DefaultMQProducer producer, Message m, int seq, boolean afterDue) throws InterruptedException {
        window.acquire();
        long begin = System.nanoTime();
        try {
            producer.send(m, new SendCallback() {
                @Override
                public void onSuccess(SendResult r) {
                    if (seq >= 0) {
                        sendLatency.recordValue((System.nanoTime() - begin) / 1000);
                    }
                    answered(r, seq, afterDue);
                    lastAnswer = System.nanoTime();
                    window.release();
                }

                @Override
                public void onException(Throwable e) {
                    failed(e, seq);
                    lastAnswer = System.nanoTime();
                    window.release();
                }
            });
        } catch (Exception e) {
            failed(e, seq);
            window.release();
            Thread.sleep(50); // a broker that refuses at once: do not spin
        }
    }

    private void answered(SendResult r, int seq, boolean afterDue) {
        if (seq < 0) {
            if (r.getSendStatus() == SendStatus.SEND_OK) {
                warmOk.increment();
            }
            return;
        }
        if (r.getSendStatus() == SendStatus.SEND_OK) {
            sentOk.set(seq, 1);
            ok.increment();
            if (afterDue) {
                sentAfterDue.increment();
            }
        } else {
            notOk.increment();
            errors.computeIfAbsent("status " + r.getSendStatus(), k -> new LongAdder()).increment();
        }
    }

    private void failed(Throwable e, int seq) {
        if (seq >= 0) {
            failed.increment();
            retries.add(seq);
        }
        String key = BrokerLoad.describe(e);
        if (e.getCause() != null && e.getCause() != e) {
            key += " <- " + BrokerLoad.describe(e.getCause());
        }
        errors.computeIfAbsent(key, k -> new LongAdder()).increment();
    }

    /** Waits until every send in flight has its answer (at most 60 s). */
    private void awaitAllAnswered() throws InterruptedException {
        if (window.tryAcquire(inflight, 60, TimeUnit.SECONDS)) {
            window.release(inflight);
        } else {
            BrokerLoad.log("some async sends never completed");
        }
    }

    private Map<String, Object> topErrors() {
        Map<String, Object> m = new LinkedHashMap<>();
        errors.entrySet().stream()
            .sorted((x, y) -> Long.compare(y.getValue().sum(), x.getValue().sum()))
            .limit(5)
            .forEach(e -> m.put(e.getKey(), e.getValue().sum()));
        return m;
    }
}
