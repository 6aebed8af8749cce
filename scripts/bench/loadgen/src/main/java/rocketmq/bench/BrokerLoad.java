package rocketmq.bench;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import java.util.function.LongSupplier;
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
 * One broker workload: producers (sync, async with a bounded in-flight window, or sync batches) and a
 * push consumer in this JVM, against one broker. Runs a warm-up (not measured; it also lets the JIT of
 * a Java broker settle), then a measured window, then stops sending and waits for the consumer to
 * drain. Writes one JSON object with the window's figures.
 */
final class BrokerLoad {
    private final String namesrv;
    private final String topic;
    private final String mode;
    private final int threads;
    private final int size;
    private final int batch;
    private final int inflight;
    private final byte[] body;

    private final LongAdder ok = new LongAdder();
    private final LongAdder notOk = new LongAdder();
    private final LongAdder failed = new LongAdder();
    private final LongAdder received = new LongAdder();
    private final Map<String, LongAdder> errors = new ConcurrentHashMap<>();
    /** sends answered with a status other than SEND_OK, by status, over the whole run (warm-up included) */
    private final Map<String, LongAdder> notOkByStatus = new ConcurrentHashMap<>();
    /** send latency in microseconds, from the call to its result (per send call: a batch is one call) */
    private final Recorder sendLatency = new Recorder(3);
    /** the same, read once a second during the window: the per-second timeline that shows a stall */
    private final Recorder perSecond = new Recorder(3);
    /** end to end in milliseconds: consume time minus the born timestamp the client stamped (ms resolution) */
    private final Recorder endToEnd = new Recorder(3);
    private volatile boolean sending = true;
    /** set between warm-up and window while the consumer catches up */
    private volatile boolean paused;
    private Semaphore window;

    private BrokerLoad(Args a) {
        namesrv = a.str("namesrv");
        topic = a.str("topic", "BenchmarkTest");
        mode = a.str("mode");
        threads = a.integer("threads", 64);
        size = a.integer("size", 128);
        batch = a.integer("batch", 16);
        inflight = a.integer("inflight", 1024);
        // one random alphanumeric body reused by every message, as RocketMQ's own benchmark does
        body = new byte[size];
        Random r = new Random(42);
        String alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        for (int i = 0; i < size; i++) {
            body[i] = (byte) alnum.charAt(r.nextInt(alnum.length()));
        }
    }

    static void run(Args a) throws Exception {
        new BrokerLoad(a).execute(a);
    }

    private int messagesPerSend() {
        return mode.equals("batch") ? batch : 1;
    }

    private void execute(Args a) throws Exception {
        int warmup = a.integer("warmup", 5);
        int duration = a.integer("duration", 20);
        int drainMax = a.integer("drain", 60);
        boolean consume = a.bool("consume", true);
        long clk = a.lng("clk-tck", 100);
        Proc broker = new Proc(a.lng("broker-pid", -1), clk);
        Proc self = new Proc(Proc.self(), clk);
        // a DLedger group (--members addr=pid,...): which member is the master is known only once the
        // group has elected, so every member is sampled and the master's Proc is taken from the route
        Group group = a.str("members", "").isEmpty() ? null : new Group(a.str("members"), clk);
        if (group != null) {
            group.startSamplers();
        } else {
            broker.startSampler();
        }
        // a master/slave pair: the slave's costs are measured like the master's, and the slave is
        // checked to hold what the master has (a broken slave must not make SYNC_MASTER look fast)
        long slavePid = a.lng("slave-pid", -1);
        Proc slave = slavePid > 0 ? new Proc(slavePid, clk) : null;
        if (slave != null) {
            slave.startSampler();
        }
        Replica replica = slave == null ? null : new Replica(a.str("master-addr"), a.str("slave-addr"));

        DefaultMQProducer producer = new DefaultMQProducer("benchmark_producer");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("bench-" + Proc.self());
        producer.setCompressMsgBodyOverHowmuch(Integer.MAX_VALUE);
        // queues of an auto-created topic (the broker caps it at TBW102's 8); BenchmarkTest is a system
        // topic that both brokers create at start with 1024 queues, so this does not apply to it
        producer.setDefaultTopicQueueNums(a.integer("queues", 8));
        producer.start();
        Prime.topic(producer, topic);
        long primed = 1;
        Map<String, Object> ready = null;
        if (replica != null) {
            replica.attach(producer);
            ready = replica.awaitReady(producer, topic, body);
            primed += (Long) ready.get("probes_stored");
        }
        if (group != null) {
            group.attach(producer);
            ready = group.awaitReady(producer, topic, body);
            primed += (Long) ready.get("probes_stored");
            if (group.master() == null) {
                Map<String, Object> out = new LinkedHashMap<>();
                out.put("valid", false);
                out.put("invalid_because", List.of("the DLedger group had no master registered with the name server after 90 s"));
                out.put("dledger", ready);
                Files.writeString(Path.of(a.str("out")), Json.write(out) + "\n", StandardCharsets.UTF_8);
                log("INVALID DLedger result: no master");
                Main.shutdownQuietly(producer::shutdown);
                return;
            }
            broker = group.master();
        }

        DefaultMQPushConsumer consumer = null;
        if (consume) {
            consumer = new DefaultMQPushConsumer("benchmark_consumer");
            consumer.setNamesrvAddr(namesrv);
            consumer.setInstanceName("bench-" + Proc.self());
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
            consumer.subscribe(topic, "*");
            consumer.registerMessageListener((MessageListenerConcurrently) (msgs, ctx) -> {
                long now = System.currentTimeMillis();
                for (MessageExt m : msgs) {
                    endToEnd.recordValue(Math.max(0, now - m.getBornTimestamp()));
                }
                received.add(msgs.size());
                return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            });
            consumer.start();
        }

        if (consumer != null) {
            awaitQueues(consumer, topic, received::sum, primed);
        }
        int serverCpu = a.integer("server-cpu", 0), clientCpu = a.integer("client-cpu", 1);

        List<Thread> senders = startSenders(producer);
        log("warm-up %d s (%s, %d threads, %d B%s)", warmup, mode, threads, size,
            mode.equals("batch") ? ", batches of " + batch : mode.equals("async") ? ", window " + inflight : "");
        Thread.sleep(warmup * 1000L);
        if (consumer != null) {
            // the warm-up leaves a backlog (a cold JIT on both sides, the first pulls of every queue);
            // measured end-to-end latency should not be the time spent working that off, so pause
            // sending until the consumer has everything, then open the window
            paused = true;
            Thread.sleep(200);
            long deadline = System.nanoTime() + drainMax * 1_000_000_000L;
            while (received.sum() < primed + ok.sum() + notOk.sum() && System.nanoTime() < deadline) {
                Thread.sleep(20);
            }
            log("consumer caught up after the warm-up (%d received)", received.sum());
            paused = false;
        }

        // the measured window
        sendLatency.reset();
        endToEnd.reset();
        long ok0 = ok.sum(), notOk0 = notOk.sum(), failed0 = failed.sum(), recv0 = received.sum();
        double bcpu0 = broker.cpuSeconds(), scpu0 = self.cpuSeconds();
        double slcpu0 = slaveCpu(slave);
        Map<String, Double> gcpu0 = group == null ? null : group.cpuSeconds();
        long[] sc0 = Proc.coreJiffies(serverCpu), cc0 = Proc.coreJiffies(clientCpu);
        long t0 = System.nanoTime();
        // one entry a second: [second, SEND_OK, failed, max send ms, p99 send ms] (sends answered in that second)
        List<List<Object>> timeline = new ArrayList<>();
        perSecond.reset();
        long okPrev = ok0, failedPrev = failed0;
        for (int i = 1; i <= duration; i++) {
            long sleep = t0 + i * 1_000_000_000L - System.nanoTime();
            if (sleep > 0) {
                Thread.sleep(sleep / 1_000_000, (int) (sleep % 1_000_000));
            }
            Histogram h = perSecond.getIntervalHistogram();
            long okNow = ok.sum(), failedNow = failed.sum();
            timeline.add(List.of(i, okNow - okPrev, failedNow - failedPrev, h.getMaxValue() / 1000.0,
                h.getValueAtPercentile(99) / 1000.0));
            okPrev = okNow;
            failedPrev = failedNow;
        }
        long ok1 = ok.sum(), notOk1 = notOk.sum(), failed1 = failed.sum(), recv1 = received.sum();
        double bcpu1 = broker.cpuSeconds(), scpu1 = self.cpuSeconds();
        double slcpu1 = slaveCpu(slave);
        Map<String, Double> gcpu1 = group == null ? null : group.cpuSeconds();
        long[] sc1 = Proc.coreJiffies(serverCpu), cc1 = Proc.coreJiffies(clientCpu);
        // how far the slave was behind when the window closed (read after the CPU times: not measured)
        long[] lagAtEnd = replica == null ? null : replica.offsets();
        double secs = (System.nanoTime() - t0) / 1e9;
        Histogram send = sendLatency.getIntervalHistogram();
        Histogram e2e = endToEnd.getIntervalHistogram();

        sending = false;
        for (Thread t : senders) {
            t.join(10_000);
        }
        if (window != null && !window.tryAcquire(inflight, 10, TimeUnit.SECONDS)) {
            log("some async sends never completed");
        }
        long expected = primed + ok.sum() + notOk.sum();
        long drainStart = System.nanoTime();
        if (consume) {
            // a consumer that fell behind catches up here; give up after drainMax seconds or 10 s without progress
            long last = -1, lastChange = System.nanoTime();
            while (received.sum() < expected && System.nanoTime() - drainStart < drainMax * 1_000_000_000L) {
                long now = received.sum();
                if (now != last) {
                    last = now;
                    lastChange = System.nanoTime();
                } else if (System.nanoTime() - lastChange > 10_000_000_000L) {
                    break;
                }
                Thread.sleep(100);
            }
        }
        double drainSecs = (System.nanoTime() - drainStart) / 1e9;
        broker.sample();
        if (group != null) {
            group.sample();
        }
        if (slave != null) {
            slave.sample();
        }

        long msgs = ok1 - ok0;
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("mode", mode);
        out.put("topic", topic);
        out.put("queues", producer.fetchPublishMessageQueues(topic).size());
        out.put("threads", threads);
        out.put("size", size);
        out.put("batch", messagesPerSend());
        out.put("inflight", mode.equals("async") ? inflight : 0);
        out.put("window_s", secs);
        out.put("send_ok", msgs);
        out.put("send_not_ok", notOk1 - notOk0);
        out.put("send_failed", failed1 - failed0);
        out.put("send_tps", msgs / secs);
        out.put("send_calls_tps", send.getTotalCount() / secs);
        out.put("send_latency_ms", Json.percentilesMs(send, 1000.0));
        out.put("send_max_ms", send.getMaxValue() / 1000.0);
        long fewest = Long.MAX_VALUE;
        Object slowest = null;
        double worstMax = -1;
        for (List<Object> t : timeline) {
            fewest = Math.min(fewest, (Long) t.get(1));
            if ((Double) t.get(3) > worstMax) {
                worstMax = (Double) t.get(3);
                slowest = t;
            }
        }
        out.put("fewest_send_ok_in_a_second", timeline.isEmpty() ? null : fewest);
        out.put("slowest_second", slowest);
        out.put("timeline_per_s", timeline);
        out.put("consume", consume);
        if (consume) {
            out.put("consume_tps", (recv1 - recv0) / secs);
            out.put("e2e_ms", Json.percentilesMs(e2e, 1.0));
            out.put("expected_total", expected);
            out.put("received_total", received.sum());
            out.put("missing_after_drain", Math.max(0, expected - received.sum()));
            out.put("drain_s", drainSecs);
        }
        double bcpu = bcpu1 - bcpu0;
        out.put("broker_cpu_s", bcpu);
        out.put("broker_cpu_util", bcpu / secs);
        out.put("broker_cpu_s_per_million", msgs > 0 ? bcpu / msgs * 1e6 : Double.NaN);
        out.put("loadgen_cpu_util", (scpu1 - scpu0) / secs);
        out.put("server_core_busy", Proc.busyFraction(sc0, sc1));
        out.put("client_core_busy", Proc.busyFraction(cc0, cc1));
        out.put("broker_vmhwm_kb", broker.statusKb("VmHWM"));
        out.put("broker_peak_rss_sampled_kb", broker.peakRssKb());
        out.put("broker_peak_anon_kb", broker.peakAnonKb());
        out.put("send_errors_whole_run", topErrors());
        Map<String, Object> statuses = new LinkedHashMap<>();
        notOkByStatus.forEach((k, v) -> statuses.put(k, v.sum()));
        out.put("send_not_ok_by_status_whole_run", statuses);
        out.put("send_not_ok_whole_run", notOk.sum());
        out.put("send_failed_whole_run", failed.sum());
        if (slave != null) {
            double slcpu = slcpu1 - slcpu0;
            out.put("slave_cpu_s", slcpu);
            out.put("slave_cpu_util", slcpu / secs);
            out.put("slave_cpu_s_per_million", msgs > 0 ? slcpu / msgs * 1e6 : Double.NaN);
            out.put("pair_cpu_s_per_million", msgs > 0 ? (bcpu + slcpu) / msgs * 1e6 : Double.NaN);
            out.put("pair_cpu_util", (bcpu + slcpu) / secs);
            out.put("slave_vmhwm_kb", slave.statusKb("VmHWM"));
            out.put("slave_peak_rss_sampled_kb", slave.peakRssKb());
            out.put("slave_peak_anon_kb", slave.peakAnonKb());
            Map<String, Object> rep = new LinkedHashMap<>(ready);
            if (lagAtEnd != null) {
                rep.put("master_offset_at_window_end", lagAtEnd[0]);
                rep.put("slave_offset_at_window_end", lagAtEnd[1]);
                rep.put("slave_lag_bytes_at_window_end", lagAtEnd[0] >= 0 && lagAtEnd[1] >= 0 ? lagAtEnd[0] - lagAtEnd[1] : -1);
            }
            rep.putAll(replica.verify());
            out.put("replication", rep);
            List<String> problems = new ArrayList<>();
            if (!slave.alive()) {
                problems.add("the slave process " + slavePid + " ended during the run");
            }
            if (!Boolean.TRUE.equals(rep.get("ready"))) {
                problems.add("the slave never acknowledged a probe send before the run");
            }
            if (!Boolean.TRUE.equals(rep.get("slave_holds_master_data"))) {
                problems.add("slave commit log max offset " + rep.get("slave_commitlog_max_offset")
                    + " != master's " + rep.get("master_commitlog_max_offset"));
            }
            if (notOk.sum() > 0) {
                problems.add(notOk.sum() + " sends answered other than SEND_OK " + statuses);
            }
            if (failed.sum() > 0) {
                problems.add(failed.sum() + " sends failed (exceptions)");
            }
            out.put("valid", problems.isEmpty());
            out.put("invalid_because", problems);
            if (!problems.isEmpty()) {
                log("INVALID master/slave result: %s", String.join("; ", problems));
            }
        }
        if (group != null) {
            List<String> problems = new ArrayList<>();
            Map<String, Object> dl = new LinkedHashMap<>(ready);
            Map<String, Object> checked = group.verify(gcpu0, gcpu1, secs, msgs, problems);
            // the group's cost next to the lone broker's keys (which here are the master's)
            for (String k : List.of("group_cpu_s", "group_cpu_util", "group_cpu_s_per_million", "members")) {
                out.put(k, checked.remove(k));
            }
            dl.putAll(checked);
            out.put("dledger", dl);
            if (!Boolean.TRUE.equals(dl.get("ready"))) {
                problems.add("no probe send was answered SEND_OK before the run");
            }
            // Sends refused or answered other than SEND_OK are counted and shown, not held against the
            // result: TPS counts SEND_OK only, so a group that refuses sends (a Java broker's flow
            // control, "broker busy", when its send queue waits over 200 ms) cannot look faster for it.
            // messages not consumed after the drain are shown ("missing after drain"): a consumer behind
            // an overloaded group is still behind then; the slaves' commit logs show what was stored
            out.put("valid", problems.isEmpty());
            out.put("invalid_because", problems);
            if (!problems.isEmpty()) {
                log("INVALID DLedger result: %s", String.join("; ", problems));
            }
        }
        Files.writeString(Path.of(a.str("out")), Json.write(out) + "\n", StandardCharsets.UTF_8);
        log("%.0f msg/s sent, p99.9 %.2f ms, %s consumed/s, broker %.2f core, loadgen %.2f core, %d failed",
            msgs / secs, send.getTotalCount() == 0 ? 0 : send.getValueAtPercentile(99.9) / 1000.0,
            consume ? String.format("%.0f", (recv1 - recv0) / secs) : "-", bcpu / secs, (scpu1 - scpu0) / secs,
            failed1 - failed0);
        if (group != null) {
            log("DLedger group: %.2f core in all, %.1f CPU s per 1M messages", (Double) out.get("group_cpu_util"),
                (Double) out.get("group_cpu_s_per_million"));
        }

        Main.shutdownQuietly(consumer == null ? null : consumer::shutdown, producer::shutdown);
    }

    /**
     * Returns once the push consumer has received the {@code primed} messages sent before it started and
     * pulls every queue of the topic (or after 60 s). It rebalances in the background, and until it owns
     * the queues messages pile up; a rebalance looks up each queue's offset in turn (1024 of them for
     * BenchmarkTest), and queues still waiting for their first pull once sending saturates this core would
     * show seconds of end-to-end latency that no broker caused.
     */
    static void awaitQueues(DefaultMQPushConsumer consumer, String topic, LongSupplier received, long primed) throws Exception {
        long deadline = System.nanoTime() + 60_000_000_000L;
        while (received.getAsLong() < primed && System.nanoTime() < deadline) {
            Thread.sleep(50);
        }
        if (received.getAsLong() < primed) {
            log("the consumer has not received the priming message after 60 s; going on");
        }
        int queues = consumer.fetchSubscribeMessageQueues(topic).size();
        Map<org.apache.rocketmq.common.message.MessageQueue, ?> owned =
            consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable();
        while (owned.keySet().stream().filter(q -> q.getTopic().equals(topic)).count() < queues
            && System.nanoTime() < deadline) {
            Thread.sleep(50);
        }
        Thread.sleep(1000); // the first pulls are dispatched right after the last offset lookup
        log("consumer owns %d queues", owned.keySet().stream().filter(q -> q.getTopic().equals(topic)).count());
    }

    /** The slave's CPU seconds, NaN without a slave or once it is gone (the result is then invalid, not lost). */
    private static double slaveCpu(Proc slave) {
        if (slave == null) {
            return 0;
        }
        try {
            return slave.cpuSeconds();
        } catch (IllegalStateException gone) {
            return Double.NaN;
        }
    }

    private List<Thread> startSenders(DefaultMQProducer producer) {
        List<Thread> list = new ArrayList<>();
        if (mode.equals("async")) {
            window = new Semaphore(inflight);
        }
        for (int i = 0; i < threads; i++) {
            Runnable loop = switch (mode) {
                case "sync", "batch" -> () -> syncLoop(producer);
                case "async" -> () -> asyncLoop(producer);
                default -> throw new IllegalArgumentException("--mode must be sync, async or batch");
            };
            Thread t = new Thread(loop, "sender-" + i);
            t.setDaemon(true);
            t.start();
            list.add(t);
        }
        return list;
    }

    private Message message() {
        return new Message(topic, body);
    }

    private void syncLoop(DefaultMQProducer producer) {
        int n = messagesPerSend();
        while (sending) {
            if (paused) {
                pause();
                continue;
            }
            long start = System.nanoTime();
            try {
                SendResult r;
                if (n == 1) {
                    r = producer.send(message());
                } else {
                    List<Message> msgs = new ArrayList<>(n);
                    for (int i = 0; i < n; i++) {
                        msgs.add(message());
                    }
                    r = producer.send(msgs);
                }
                long us = (System.nanoTime() - start) / 1000;
                sendLatency.recordValue(us);
                perSecond.recordValue(us);
                counted(r, n);
            } catch (Exception e) {
                failed(e, n);
                pause();
            }
        }
    }

    private void asyncLoop(DefaultMQProducer producer) {
        while (sending) {
            if (paused) {
                pause();
                continue;
            }
            try {
                if (!window.tryAcquire(100, TimeUnit.MILLISECONDS)) {
                    continue;
                }
            } catch (InterruptedException e) {
                return;
            }
            long start = System.nanoTime();
            try {
                producer.send(message(), new SendCallback() {
                    @Override
                    public void onSuccess(SendResult r) {
                        long us = (System.nanoTime() - start) / 1000;
                        sendLatency.recordValue(us);
                        perSecond.recordValue(us);
                        counted(r, 1);
                        window.release();
                    }

                    @Override
                    public void onException(Throwable e) {
                        failed(e, 1);
                        window.release();
                    }
                });
            } catch (Exception e) {
                failed(e, 1);
                window.release();
                pause();
            }
        }
    }

    private void counted(SendResult r, int n) {
        if (r.getSendStatus() == SendStatus.SEND_OK) {
            ok.add(n);
        } else {
            // stored, but e.g. FLUSH_DISK_TIMEOUT under SYNC_FLUSH: the consumer still gets these
            notOk.add(n);
            errors.computeIfAbsent("status " + r.getSendStatus(), k -> new LongAdder()).add(n);
            notOkByStatus.computeIfAbsent(r.getSendStatus().name(), k -> new LongAdder()).add(n);
        }
    }

    private void failed(Throwable e, int n) {
        failed.add(n);
        // numbers (queue sizes, waits, addresses) vary from one error to the next: group without them
        String key = describe(e);
        // the client's "Send [N] times, still failed" hides why: its cause is the last attempt's error
        if (e.getCause() != null && e.getCause() != e) {
            key += " <- " + describe(e.getCause());
        }
        errors.computeIfAbsent(key, k -> new LongAdder()).add(n);
    }

    static String describe(Throwable e) {
        String msg = String.valueOf(e.getMessage()).split("\n")[0].replaceAll("[0-9]+", "N");
        return e.getClass().getSimpleName() + ": " + (msg.length() > 160 ? msg.substring(0, 160) : msg);
    }

    /** After a failed send, back off a little rather than spin on a broker that refuses; or wait while paused. */
    private static void pause() {
        try {
            Thread.sleep(50);
        } catch (InterruptedException ignored) {
            Thread.currentThread().interrupt();
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

    /** when this JVM started its work (the harness starts it once the brokers listen) */
    static final long STARTED = System.nanoTime();

    static void log(String fmt, Object... args) {
        System.out.printf("[loadgen] %5.1fs " + fmt + "%n", prepend((System.nanoTime() - STARTED) / 1e9, args));
    }

    private static Object[] prepend(Object first, Object[] rest) {
        Object[] all = new Object[rest.length + 1];
        all[0] = first;
        System.arraycopy(rest, 0, all, 1, rest.length);
        return all;
    }
}
