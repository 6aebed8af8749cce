package rocketmq.bench;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.TopicConfig;

/**
 * The gRPC workload (i): the official RocketMQ 5 Java client (rocketmq-client-java) against a broker's gRPC
 * front in local mode (ours: {@code mqbroker --enable-proxy}; Java: ProxyStartup {@code -pm local}, broker and
 * proxy in one JVM), or (j) Java's proxy in cluster mode in front of a broker, a process of its own whose CPU
 * is reported with {@code --proxy-pid}. A Producer sends 1 KiB messages (sync from many threads, or async with
 * a bounded window) to a NORMAL topic, while SimpleConsumers receive batches with long polling and ack every
 * message. Phases as in {@link BrokerLoad}: warm-up, pause until the consumers caught up, measured window,
 * drain. The topic is created beforehand through the broker's remoting port (UPDATE_AND_CREATE_TOPIC with
 * {@code +message.type=NORMAL}, what {@code mqadmin updateTopic -a} sends): the gRPC front serves no topic
 * it does not know, and checks a message's type against the topic's.
 */
final class GrpcLoad {
    private final String topic;
    private final String mode;
    private final int threads;
    private final int inflight;
    private final int batch;
    /** sent but not yet received messages above which the senders wait (0: no bound) */
    private final long maxBacklog;
    private final Duration invisible;
    private final byte[] body;
    private final ClientServiceProvider provider = ClientServiceProvider.loadService();

    private final LongAdder ok = new LongAdder();
    private final LongAdder failed = new LongAdder();
    /** messages received for the first time (delivery attempt 1), acked or not */
    private final LongAdder firstDeliveries = new LongAdder();
    /** messages received again (delivery attempt > 1: the invisible time ran out before an ack) */
    private final LongAdder redelivered = new LongAdder();
    private final LongAdder acked = new LongAdder();
    private final LongAdder ackFailed = new LongAdder();
    private final LongAdder receiveCalls = new LongAdder();
    private final LongAdder emptyReceives = new LongAdder();
    private final LongAdder receiveFailed = new LongAdder();
    private final Map<String, LongAdder> errors = new ConcurrentHashMap<>();
    private final Recorder sendLatency = new Recorder(3);
    /** end to end in milliseconds: receive time minus the born timestamp the client stamped */
    private final Recorder endToEnd = new Recorder(3);
    private volatile boolean sending = true;
    private volatile boolean consuming = true;
    private volatile boolean paused;
    private Semaphore window;

    private GrpcLoad(Args a) {
        topic = a.str("topic", "bench_grpc");
        mode = a.str("mode", "sync");
        threads = a.integer("threads", 64);
        inflight = a.integer("inflight", 1024);
        batch = a.integer("batch", 32);
        maxBacklog = a.lng("max-backlog", 0);
        invisible = Duration.ofSeconds(a.integer("invisible-s", 30));
        int size = a.integer("size", 1024);
        // one random alphanumeric body reused by every message, as in the other workloads
        body = new byte[size];
        Random r = new Random(42);
        String alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        for (int i = 0; i < size; i++) {
            body[i] = (byte) alnum.charAt(r.nextInt(alnum.length()));
        }
    }

    static void run(Args a) throws Exception {
        new GrpcLoad(a).execute(a);
    }

    private void execute(Args a) throws Exception {
        int warmup = a.integer("warmup", 5);
        int duration = a.integer("duration", 20);
        int drainMax = a.integer("drain", 60);
        long clk = a.lng("clk-tck", 100);
        Proc broker = new Proc(a.lng("broker-pid", -1), clk);
        Proc self = new Proc(Proc.self(), clk);
        // j: the proxy in front of the broker is a process of its own (on the client core); its CPU is
        // reported next to the broker's, so a reader sees whether the proxy, not the broker, was the limit
        long proxyPid = a.lng("proxy-pid", -1);
        Proc proxy = proxyPid > 0 ? new Proc(proxyPid, clk) : null;
        broker.startSampler();
        int queues = a.integer("queues", 8);
        createTopic(a.str("namesrv"), a.str("broker-addr"), queues);

        ClientConfiguration conf = ClientConfiguration.newBuilder()
            .setEndpoints(a.str("endpoint"))
            .enableSsl(false)
            .setRequestTimeout(Duration.ofSeconds(a.integer("request-timeout-s", 10)))
            .build();
        Producer producer = provider.newProducerBuilder().setClientConfiguration(conf).setTopics(topic).build();
        int consumers = a.integer("consumers", 4);
        int receivers = a.integer("receivers", 2);
        Duration await = Duration.ofSeconds(a.integer("await-s", 5));
        String group = a.str("group", "bench_grpc_group");
        List<SimpleConsumer> simple = new ArrayList<>();
        List<Thread> receiving = new ArrayList<>();
        for (int c = 0; c < consumers; c++) {
            SimpleConsumer sc = provider.newSimpleConsumerBuilder()
                .setClientConfiguration(conf)
                .setConsumerGroup(group)
                .setAwaitDuration(await)
                .setSubscriptionExpressions(Map.of(topic, FilterExpression.SUB_ALL))
                .build();
            simple.add(sc);
            for (int t = 0; t < receivers; t++) {
                Thread th = new Thread(() -> receiveLoop(sc), "receiver-" + c + "-" + t);
                th.setDaemon(true);
                th.start();
                receiving.add(th);
            }
        }
        log("producer and %d SimpleConsumers x %d receivers (batches of %d, long polling %d s) on %s",
            consumers, receivers, batch, await.toSeconds(), a.str("endpoint"));
        int serverCpu = a.integer("server-cpu", 0), clientCpu = a.integer("client-cpu", 1);

        startSenders(producer);
        log("warm-up %d s (%s, %d threads, %d B%s)", warmup, mode, threads, body.length,
            mode.equals("async") ? ", window " + inflight : "");
        Thread.sleep(warmup * 1000L);
        // as in BrokerLoad: the window's end-to-end latency should not be the warm-up's backlog
        paused = true;
        Thread.sleep(500);
        long deadline = System.nanoTime() + drainMax * 1_000_000_000L;
        while (firstDeliveries.sum() < ok.sum() && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        log("consumers caught up after the warm-up (%d of %d received)", firstDeliveries.sum(), ok.sum());
        paused = false;

        sendLatency.reset();
        endToEnd.reset();
        long ok0 = ok.sum(), failed0 = failed.sum(), acked0 = acked.sum(), first0 = firstDeliveries.sum();
        double bcpu0 = broker.cpuSeconds(), scpu0 = self.cpuSeconds();
        double pcpu0 = proxy == null ? 0 : proxy.cpuSeconds();
        long[] sc0 = Proc.coreJiffies(serverCpu), cc0 = Proc.coreJiffies(clientCpu);
        long t0 = System.nanoTime();
        List<List<Object>> timeline = new ArrayList<>();
        long okPrev = ok0, ackPrev = acked0;
        for (int i = 1; i <= duration; i++) {
            long sleep = t0 + i * 1_000_000_000L - System.nanoTime();
            if (sleep > 0) {
                Thread.sleep(sleep / 1_000_000, (int) (sleep % 1_000_000));
            }
            long okNow = ok.sum(), ackNow = acked.sum();
            timeline.add(List.of(i, okNow - okPrev, ackNow - ackPrev));
            okPrev = okNow;
            ackPrev = ackNow;
            if (i % 5 == 0 || i == duration) {
                log("%3d s: %d sent/s, %d received+acked/s", i, timeline.get(i - 1).get(1), timeline.get(i - 1).get(2));
            }
        }
        double secs = (System.nanoTime() - t0) / 1e9;
        Histogram send = sendLatency.getIntervalHistogram();
        Histogram e2e = endToEnd.getIntervalHistogram();
        long ok1 = ok.sum(), failed1 = failed.sum(), acked1 = acked.sum(), first1 = firstDeliveries.sum();
        double bcpu1 = broker.cpuSeconds(), scpu1 = self.cpuSeconds();
        double pcpu1 = proxy == null ? 0 : proxy.cpuSeconds();
        long[] sc1 = Proc.coreJiffies(serverCpu), cc1 = Proc.coreJiffies(clientCpu);
        broker.sample();

        // drain: stop sending, wait for the consumers to receive everything sent
        sending = false;
        long drainStart = System.nanoTime();
        deadline = drainStart + drainMax * 1_000_000_000L;
        Thread.sleep(200);
        // async: the sends still in flight are answered before the count of what was sent is taken
        while (window != null && window.availablePermits() < inflight && System.nanoTime() < deadline) {
            Thread.sleep(20);
        }
        long expected = ok.sum();
        while (firstDeliveries.sum() < expected && System.nanoTime() < deadline) {
            Thread.sleep(50);
        }
        double drainSecs = (System.nanoTime() - drainStart) / 1e9;
        consuming = false;

        long sent = ok1 - ok0;
        long consumed = acked1 - acked0;
        double bcpu = bcpu1 - bcpu0;
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("mode", mode);
        out.put("topic", topic);
        out.put("queues", queues);
        out.put("threads", threads);
        out.put("size", body.length);
        out.put("inflight", mode.equals("async") ? inflight : 0);
        out.put("consumers", consumers);
        out.put("receivers_per_consumer", receivers);
        out.put("receive_batch", batch);
        out.put("max_backlog", maxBacklog);
        out.put("window_s", secs);
        out.put("send_ok", sent);
        out.put("send_not_ok", 0);
        out.put("send_failed", failed1 - failed0);
        out.put("send_tps", sent / secs);
        out.put("send_latency_ms", Json.percentilesMs(send, 1000.0));
        out.put("send_max_ms", send.getMaxValue() / 1000.0);
        out.put("timeline_per_s", timeline);
        out.put("consume", true);
        out.put("consume_tps", consumed / secs);
        out.put("first_receive_tps", (first1 - first0) / secs);
        out.put("e2e_ms", Json.percentilesMs(e2e, 1.0));
        out.put("expected_total", expected);
        out.put("received_total", firstDeliveries.sum());
        out.put("acked_total", acked.sum());
        out.put("redelivered_total", redelivered.sum());
        out.put("ack_failed_total", ackFailed.sum());
        out.put("receive_calls_total", receiveCalls.sum());
        out.put("empty_receives_total", emptyReceives.sum());
        out.put("receive_failed_total", receiveFailed.sum());
        out.put("missing_after_drain", Math.max(0, expected - firstDeliveries.sum()));
        out.put("drain_s", drainSecs);
        out.put("broker_cpu_s", bcpu);
        out.put("broker_cpu_util", bcpu / secs);
        // per message sent in the window (its receive and ack included), as the other workloads
        out.put("broker_cpu_s_per_million", sent > 0 ? bcpu / sent * 1e6 : Double.NaN);
        // per message sent or consumed (received and acked): the workload's headline cost
        out.put("broker_cpu_us_per_op", sent + consumed > 0 ? bcpu / (sent + consumed) * 1e6 : Double.NaN);
        out.put("loadgen_cpu_util", (scpu1 - scpu0) / secs);
        out.put("server_core_busy", Proc.busyFraction(sc0, sc1));
        out.put("client_core_busy", Proc.busyFraction(cc0, cc1));
        out.put("broker_vmhwm_kb", broker.statusKb("VmHWM"));
        out.put("broker_peak_rss_sampled_kb", broker.peakRssKb());
        out.put("broker_peak_anon_kb", broker.peakAnonKb());
        if (proxy != null) {
            double pcpu = pcpu1 - pcpu0;
            out.put("proxy_cpu_s", pcpu);
            out.put("proxy_cpu_util", pcpu / secs);
            out.put("proxy_cpu_us_per_op", sent + consumed > 0 ? pcpu / (sent + consumed) * 1e6 : Double.NaN);
            out.put("proxy_vmhwm_kb", proxy.statusKb("VmHWM"));
        }
        out.put("send_failed_whole_run", failed.sum());
        out.put("errors_whole_run", topErrors());
        Files.writeString(Path.of(a.str("out")), Json.write(out) + "\n", StandardCharsets.UTF_8);
        log("%.0f msg/s sent, p99.9 %.2f ms, %.0f received+acked/s, broker %.2f core (%.1f us/msg sent), loadgen %.2f core,"
                + " %d send failed, %d missing after drain",
            sent / secs, send.getTotalCount() == 0 ? 0 : send.getValueAtPercentile(99.9) / 1000.0, consumed / secs,
            bcpu / secs, sent > 0 ? bcpu / sent * 1e6 : 0, (scpu1 - scpu0) / secs, failed1 - failed0,
            Math.max(0, expected - firstDeliveries.sum()));
        List<Runnable> closing = new ArrayList<>();
        for (SimpleConsumer sc : simple) {
            closing.add(() -> closeQuietly(sc));
        }
        closing.add(() -> closeQuietly(producer));
        Main.shutdownQuietly(closing.toArray(new Runnable[0]));
    }

    /**
     * UPDATE_AND_CREATE_TOPIC with {@code +message.type=NORMAL} on the broker's remoting port (retried while a
     * fresh broker is starting), then wait until the name server serves the route: the gRPC front answers a
     * route query from the name server's view.
     */
    private void createTopic(String namesrv, String brokerAddr, int queues) throws Exception {
        DefaultMQProducer admin = new DefaultMQProducer("bench_grpc_admin");
        admin.setNamesrvAddr(namesrv);
        admin.setInstanceName("bench-admin-" + Proc.self());
        admin.setVipChannelEnabled(false);
        admin.start();
        try {
            TopicConfig tc = new TopicConfig(topic, queues, queues, 6);
            tc.setAttributes(Map.of("+message.type", "NORMAL"));
            long deadline = System.nanoTime() + 90_000_000_000L;
            Exception last = null;
            while (System.nanoTime() < deadline) {
                try {
                    admin.getDefaultMQProducerImpl().getMqClientFactory().getMQClientAPIImpl()
                        .createTopic(brokerAddr, "TBW102", tc, 15_000);
                    last = null;
                    break;
                } catch (Exception e) {
                    last = e;
                    Thread.sleep(500);
                }
            }
            if (last != null) {
                throw new IllegalStateException("could not create " + topic + " on " + brokerAddr, last);
            }
            while (System.nanoTime() < deadline) {
                try {
                    if (admin.fetchPublishMessageQueues(topic).size() == queues) {
                        log("topic %s created (%d queues, +message.type=NORMAL); the name server serves its route", topic, queues);
                        return;
                    }
                } catch (Exception e) {
                    last = e;
                }
                Thread.sleep(200);
            }
            throw new IllegalStateException("the name server never served the route of " + topic, last);
        } finally {
            Main.shutdownQuietly(admin::shutdown);
        }
    }

    private void startSenders(Producer producer) {
        if (mode.equals("async")) {
            window = new Semaphore(inflight);
        }
        for (int i = 0; i < threads; i++) {
            Runnable loop = switch (mode) {
                case "sync" -> () -> syncLoop(producer);
                case "async" -> () -> asyncLoop(producer);
                default -> throw new IllegalArgumentException("--mode must be sync or async");
            };
            Thread t = new Thread(loop, "sender-" + i);
            t.setDaemon(true);
            t.start();
        }
    }

    private Message message() {
        return provider.newMessageBuilder().setTopic(topic).setBody(body).build();
    }

    private void syncLoop(Producer producer) {
        while (sending) {
            if (paused) {
                pause();
                continue;
            }
            if (backlogFull()) {
                continue;
            }
            long start = System.nanoTime();
            try {
                producer.send(message());
                sendLatency.recordValue((System.nanoTime() - start) / 1000);
                ok.increment();
            } catch (Exception e) {
                failed.increment();
                error("send", e);
                pause();
            }
        }
    }

    private void asyncLoop(Producer producer) {
        while (sending) {
            if (paused) {
                pause();
                continue;
            }
            if (backlogFull()) {
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
            producer.sendAsync(message()).whenComplete((r, e) -> {
                if (e == null) {
                    sendLatency.recordValue((System.nanoTime() - start) / 1000);
                    ok.increment();
                } else {
                    failed.increment();
                    error("send", e);
                }
                window.release();
            });
        }
    }

    /**
     * The client's one core is shared by sending and receiving, and a send costs it less than a receive and
     * an ack: unbounded, the senders take the core and the consumers fall ever further behind, so the server
     * would be measured storing messages nobody reads. Over the bound the senders wait a millisecond.
     */
    private boolean backlogFull() {
        if (maxBacklog <= 0 || ok.sum() - firstDeliveries.sum() < maxBacklog) {
            return false;
        }
        try {
            Thread.sleep(1);
        } catch (InterruptedException ignored) {
            Thread.currentThread().interrupt();
        }
        return true;
    }

    /** One receiver: long-polling receives of up to {@code batch} messages, each message acked, all acks awaited. */
    private void receiveLoop(SimpleConsumer consumer) {
        while (consuming) {
            List<MessageView> views;
            try {
                receiveCalls.increment();
                views = consumer.receive(batch, invisible);
            } catch (Exception e) {
                receiveFailed.increment();
                error("receive", e);
                pause();
                continue;
            }
            if (views.isEmpty()) {
                emptyReceives.increment();
                continue;
            }
            long now = System.currentTimeMillis();
            List<CompletableFuture<Void>> acks = new ArrayList<>(views.size());
            for (MessageView v : views) {
                if (v.getDeliveryAttempt() > 1) {
                    redelivered.increment();
                } else {
                    firstDeliveries.increment();
                    endToEnd.recordValue(Math.max(0, now - v.getBornTimestamp()));
                }
                acks.add(consumer.ackAsync(v).whenComplete((x, e) -> {
                    if (e == null) {
                        acked.increment();
                    } else {
                        ackFailed.increment();
                        error("ack", e);
                    }
                }));
            }
            try {
                CompletableFuture.allOf(acks.toArray(new CompletableFuture[0])).join();
            } catch (RuntimeException e) {
                // counted per ack above
            }
        }
    }

    private void error(String what, Throwable e) {
        Throwable t = e instanceof java.util.concurrent.CompletionException && e.getCause() != null ? e.getCause() : e;
        String msg = String.valueOf(t.getMessage()).split("\n")[0].replaceAll("[0-9]+", "N");
        String key = what + ": " + t.getClass().getSimpleName() + ": " + (msg.length() > 160 ? msg.substring(0, 160) : msg);
        errors.computeIfAbsent(key, k -> new LongAdder()).increment();
    }

    private Map<String, Object> topErrors() {
        Map<String, Object> m = new LinkedHashMap<>();
        errors.entrySet().stream()
            .sorted((x, y) -> Long.compare(y.getValue().sum(), x.getValue().sum()))
            .limit(5)
            .forEach(e -> m.put(e.getKey(), e.getValue().sum()));
        return m;
    }

    private static void closeQuietly(AutoCloseable c) {
        try {
            c.close();
        } catch (Exception ignored) {
            // the process ends anyway
        }
    }

    private static void pause() {
        try {
            Thread.sleep(50);
        } catch (InterruptedException ignored) {
            Thread.currentThread().interrupt();
        }
    }

    private static void log(String fmt, Object... args) {
        BrokerLoad.log(fmt, args);
    }
}
