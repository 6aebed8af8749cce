package rocketmq.compat.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.SortedMap;
import java.util.SortedSet;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.function.Predicate;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Collectors;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import rocketmq.compat.client.DriverRun;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.harness.FreePorts;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * Our broker's Prometheus metrics against a Java 5.3.3 broker's, in one run. Both are started with
 * {@code metricsExporterType=PROM} on a free {@code metricsPromExporterPort}, each behind its own name server
 * (Java's 5.3.3, ours with the same three keys), and get the same workload from a 5.3.3 client
 * ({@code MetricsDriver}): 20 sends to a topic consumed by a push group, a committed and a rolled-back
 * transaction, 2 messages a group sends to its DLQ, 2 delayed ones (level 1) and 2 timer messages (2 s; both brokers
 * run with {@code timerWheelEnable=true}, so the timer's families are compared too). While those clients are still
 * connected both {@code /metrics} are scraped until they show the workload; then every sample name Java exports
 * (but {@code rocketmq_pop_buffer_scan_time_consume}, the pass time of Java's pop buffer merge service, which ours
 * does not have, and the exporter's {@code target_info} and {@code otel_scope_info}) must be exported by ours with the same label-key sets, the combinations of enumerated
 * label values Java's samples of the workload show (request and response codes, results, processors, message
 * types, versions...) and the histograms' bucket bounds must show in ours, and the counts the workload fixes must
 * be Java's. Our name server must count the clients' route queries. The scrapes are kept in
 * {@code target/prometheus-metrics/}. The workload also makes one request-reply ({@code PromReplyTopic}, answered
 * into the broker's {@code <cluster>_REPLY_TOPIC}); once it ran, the per-topic and per-group counters that
 * {@code mqadmin statsAll} reads (VIEW_BROKER_STATS_DATA, the last minute) must show on ours what Java's show for
 * the stored reply and the delayed deliveries.
 */
@DisplayName("Prometheus metrics: our broker against Java 5.3.3's")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class PrometheusMetricsTest {
    static final String TOPIC = "PromTopic";
    static final String GROUP = "PromGroup";
    static final String TX_TOPIC = "PromTxTopic";
    static final String DLQ_TOPIC = "PromDlqTopic";
    static final String DLQ_GROUP = "PromDlqGroup";
    static final String DELAY_TOPIC = "PromDelayTopic";
    static final String REPLY_TOPIC = "PromReplyTopic";
    static final String TIMER_TOPIC = "PromTimerTopic";
    static final int TIMERS = 2;
    static final String REPLY_GROUP = "PromReplyGroup";
    /** Java's schedule service reads its topic as this group (MixAll.SCHEDULE_CONSUMER_GROUP). */
    static final String SCHEDULE_TOPIC = "SCHEDULE_TOPIC_XXXX";
    static final String SCHEDULE_GROUP = "SCHEDULE_CONSUMER";
    static final int COUNT = 20;
    static final int DEAD_LETTERS = 2;
    static final int DELAYED = 2;
    private static final Duration ROUTE_TIMEOUT = Duration.ofSeconds(30);
    private static final Duration DRIVER_TIMEOUT = Duration.ofSeconds(60);
    /**
     * Java's consumer lag follows the group's committed offsets, which the client commits every 5 s; a parked pull
     * is answered after 15 s.
     */
    private static final Duration WORKLOAD_TIMEOUT = Duration.ofSeconds(40);
    /** Ours may show a periodic request code (a heartbeat, an offset commit) a few seconds after Java did. */
    private static final Duration COVERAGE_TIMEOUT = Duration.ofSeconds(15);
    private static final String HIST = "rocketmq_rpc_latency_milliseconds_count";
    /** The stats manager samples every 10 s; its minute window then shows what was counted. */
    private static final Duration STATS_TIMEOUT = Duration.ofSeconds(25);

    /**
     * VIEW_BROKER_STATS_DATA items (stats name, key; {@code <cluster>} stands for the broker's cluster) and the last
     * minute's sum Java 5.3.3 shows for them after the workload: the stored reply under the reply topic; a delayed
     * message under the schedule topic when sent, under its real topic when delivered, and as read from the
     * schedule topic by {@code SCHEDULE_CONSUMER}. Ours must show the same.
     */
    static final Map<List<String>, Long> STATS_ALL = new LinkedHashMap<>();

    static {
        STATS_ALL.put(List.of("TOPIC_PUT_NUMS", "<cluster>_REPLY_TOPIC"), 1L);
        STATS_ALL.put(List.of("TOPIC_PUT_NUMS", DELAY_TOPIC), (long) DELAYED);
        STATS_ALL.put(List.of("TOPIC_PUT_NUMS", SCHEDULE_TOPIC), (long) DELAYED);
        STATS_ALL.put(List.of("GROUP_GET_NUMS", SCHEDULE_TOPIC + "@" + SCHEDULE_GROUP), (long) DELAYED);
    }

    /** Stats items whose sums depend on more than the workload's counts (stored sizes): printed only. */
    static final List<List<String>> STATS_INFO = List.of(List.of("TOPIC_PUT_SIZE", "<cluster>_REPLY_TOPIC"),
        List.of("TOPIC_PUT_SIZE", DELAY_TOPIC), List.of("GROUP_GET_SIZE", SCHEDULE_TOPIC + "@" + SCHEDULE_GROUP),
        List.of("TOPIC_PUT_NUMS", TX_TOPIC), List.of("SNDBCK_PUT_NUMS", DLQ_TOPIC + "@" + DLQ_GROUP));

    /**
     * Label keys whose values name what happened, not where: every combination of them a sample of Java's shows
     * (for the workload's topics and groups) must show in a sample of ours of the same name.
     */
    static final List<String> ENUMERATED_KEYS = List.of("request_code", "response_code", "result", "is_long_polling",
        "protocol_type", "processor", "message_type", "consume_mode", "language", "version", "is_system", "is_retry",
        "storage_type", "storage_medium", "node_type", "invocation_status", "otel_scope_name", "topic", "consumer_group",
        "le");
    /**
     * The topics and groups the workload itself touches (the half messages go to RMQ_SYS_TRANS_HALF_TOPIC). Java's
     * samples of other ones, such as its transaction check service reading RMQ_SYS_TRANS_OP_HALF_TOPIC as group
     * CID_RMQ_SYS_TRANS, say how Java works inside, so their label values are not asked of ours.
     */
    static final Set<String> WORKLOAD_TOPICS = Set.of(TOPIC, TX_TOPIC, DLQ_TOPIC, DELAY_TOPIC, SCHEDULE_TOPIC, TIMER_TOPIC,
        "RMQ_SYS_TRANS_HALF_TOPIC", "%RETRY%" + GROUP, "%RETRY%" + DLQ_GROUP, "%DLQ%" + DLQ_GROUP);
    static final Set<String> WORKLOAD_GROUPS = Set.of(GROUP, DLQ_GROUP, SCHEDULE_GROUP);
    static final Predicate<Exposition.Sample> OF_THE_WORKLOAD = s ->
        WORKLOAD_TOPICS.contains(s.labels().getOrDefault("topic", TOPIC))
            && WORKLOAD_GROUPS.contains(s.labels().getOrDefault("consumer_group", GROUP))
            // The test's own statsAll reads: which of them found an item depends on when they ran.
            && !"view_broker_stats_data".equals(s.labels().get("request_code"));

    /** Counts the workload fixes exactly (no periodic requests among them): ours must equal Java's. */
    static final List<Map.Entry<String, Map<String, String>>> SAME_COUNTS = List.of(
        Map.entry("rocketmq_messages_in_total", Map.of("topic", TOPIC)),
        Map.entry("rocketmq_messages_in_total", Map.of("topic", DLQ_TOPIC)),
        Map.entry("rocketmq_messages_in_total", Map.of("topic", "RMQ_SYS_TRANS_HALF_TOPIC", "message_type", "transaction")),
        Map.entry("rocketmq_messages_out_total", Map.of("topic", TOPIC, "consumer_group", GROUP)),
        Map.entry("rocketmq_messages_out_total", Map.of("topic", DLQ_TOPIC, "consumer_group", DLQ_GROUP)),
        Map.entry("rocketmq_messages_in_total", Map.of("topic", DELAY_TOPIC)),
        Map.entry("rocketmq_messages_out_total", Map.of("topic", SCHEDULE_TOPIC, "consumer_group", SCHEDULE_GROUP)),
        Map.entry("rocketmq_message_size_count", Map.of("topic", TOPIC, "message_type", "normal")),
        Map.entry("rocketmq_message_size_count", Map.of("topic", "RMQ_SYS_TRANS_HALF_TOPIC")),
        // The stored size of the same messages (same topic, key, body and property lengths on both).
        Map.entry("rocketmq_message_size_sum", Map.of("topic", TOPIC, "message_type", "normal")),
        Map.entry("rocketmq_throughput_in_total", Map.of("topic", TOPIC)),
        Map.entry("rocketmq_throughput_out_total", Map.of("topic", TOPIC, "consumer_group", GROUP)),
        Map.entry("rocketmq_producer_connections", Map.of("language", "java", "version", "v5_3_3")),
        Map.entry("rocketmq_consumer_connections", Map.of("consumer_group", GROUP)),
        Map.entry("rocketmq_consumer_connections", Map.of("consumer_group", DLQ_GROUP)),
        Map.entry("rocketmq_consumer_lag_messages", Map.of("topic", DLQ_TOPIC, "consumer_group", DLQ_GROUP)),
        Map.entry(HIST, Map.of("request_code", "send_message_v2", "response_code", "success")),
        Map.entry(HIST, Map.of("request_code", "consumer_send_msg_back")),
        Map.entry(HIST, Map.of("request_code", "end_transaction", "result", "oneway")),
        Map.entry(HIST, Map.of("request_code", "update_and_create_topic")),
        Map.entry("rocketmq_topic_create_execution_time_milliseconds_count", Map.of("invocation_status", "success")),
        Map.entry("rocketmq_timer_enqueue_total", Map.of("topic", TIMER_TOPIC)),
        Map.entry("rocketmq_timer_dequeue_total", Map.of("topic", TIMER_TOPIC)),
        Map.entry("rocketmq_delay_message_latency_seconds_count", Map.of("topic", TIMER_TOPIC)),
        Map.entry("rocketmq_timing_messages", Map.of("topic", TIMER_TOPIC)));

    /** Values that depend on more than the workload (system topics, how a half message is stored): printed only. */
    static final List<Map.Entry<String, Map<String, String>>> INFO_VALUES = List.of(
        Map.entry("rocketmq_topic_number", Map.of()),
        Map.entry("rocketmq_consumer_group_number", Map.of()),
        Map.entry("rocketmq_message_size_sum", Map.of("topic", "RMQ_SYS_TRANS_HALF_TOPIC")),
        Map.entry("rocketmq_message_size_sum", Map.of("topic", DELAY_TOPIC)),
        Map.entry(HIST, Map.of("request_code", "pull_message", "is_long_polling", "true")),
        Map.entry(HIST, Map.of("request_code", "query_consumer_offset")));

    @TempDir
    static Path dir;
    Side java;
    Side ours;
    Exposition ourNamesrv;
    Throwable ourNamesrvFailure;

    /** One broker and name server under test, the workload's driver, and what its /metrics showed. */
    static final class Side implements AutoCloseable {
        final String who;
        /** "java" or "our": names its folders and kept scrapes. */
        final String id;
        final List<AutoCloseable> closeables = new ArrayList<>();
        int brokerMetricsPort;
        int namesrvMetricsPort;
        String namesrvAddress;
        String brokerAddress;
        String brokerName;
        String cluster;
        /** The STATS_ALL and STATS_INFO sums, by "NAME KEY"; null when not read. */
        Map<String, Long> stats;
        Throwable statsFailure;
        DriverRun.Running driver;
        Path stopFile;
        Exposition scrape;
        List<String> workloadGaps = List.of("not scraped");
        final List<String> stepFailures = new ArrayList<>();
        Throwable failure;

        Side(String who, String id) {
            this.who = who;
            this.id = id;
        }

        <T extends AutoCloseable> T keep(T c) {
            closeables.add(0, c);
            return c;
        }

        /** Fails with why this side has no scrape (set-up, driver or HTTP failure). */
        Exposition scrapeOrFail() {
            if (scrape == null) {
                throw new AssertionError(who + ": no /metrics scrape", failure);
            }
            return scrape;
        }

        @Override
        public void close() {
            for (AutoCloseable c : closeables) {
                try {
                    c.close();
                } catch (Exception e) {
                    System.out.println("closing " + c + ": " + e);
                }
            }
        }
    }

    static Map<String, String> promKeys(int port) {
        Map<String, String> keys = new LinkedHashMap<>();
        keys.put("metricsExporterType", "PROM");
        keys.put("metricsPromExporterHost", "127.0.0.1");
        keys.put("metricsPromExporterPort", Integer.toString(port));
        keys.put("timerWheelEnable", "true");
        return keys;
    }

    @BeforeAll
    void start() throws Exception {
        long started = System.nanoTime();
        java = new Side("Java 5.3.3 broker", "java");
        ours = new Side("our broker", "our");
        try {
            java.brokerMetricsPort = FreePorts.one();
            NameServer ns = java.keep(NameServer.start(dir.resolve("java-namesrv"), "java"));
            java.namesrvAddress = ns.address();
            java.brokerName = "jb1";
            java.cluster = "JC";
            JavaBroker broker = java.keep(JavaBroker.start(Versions.JAVA_5, dir.resolve("java-broker"), ns.address(),
                "JC", java.brokerName, promKeys(java.brokerMetricsPort)));
            java.brokerAddress = broker.address();
        } catch (RuntimeException | Error e) {
            java.failure = e;
        }
        try {
            ours.brokerMetricsPort = FreePorts.one();
            ours.namesrvMetricsPort = FreePorts.one();
            NameServer ns = ours.keep(NameServer.start(dir.resolve("our-namesrv"), "rust", promKeys(ours.namesrvMetricsPort)));
            ours.namesrvAddress = ns.address();
            ours.brokerName = "rb1";
            ours.cluster = "RC";
            RustBroker broker = ours.keep(RustBroker.start(dir.resolve("our-broker"), ns.address(), "RC", ours.brokerName,
                promKeys(ours.brokerMetricsPort)));
            ours.brokerAddress = broker.address();
        } catch (RuntimeException | Error e) {
            ours.failure = e;
        }
        System.out.println("servers started after " + secondsSince(started) + " s");
        // The same workload against both at once, each side's steps in order.
        for (Side side : List.of(java, ours)) {
            if (side.failure == null) {
                try {
                    startWorkload(side);
                } catch (RuntimeException | Error e) {
                    side.failure = e;
                }
            }
        }
        for (Side side : List.of(java, ours)) {
            if (side.failure == null) {
                try {
                    awaitHolding(side);
                } catch (RuntimeException | Error e) {
                    side.failure = e;
                }
            }
        }
        System.out.println("workloads done, clients holding, after " + secondsSince(started) + " s");
        // Read soon: the minute window forgets a count a minute after its first sample.
        readStatsAll();
        System.out.println("statsAll counters read after " + secondsSince(started) + " s");
        scrapeUntilWorkload(java, null);
        System.out.println("Java's scrape after " + secondsSince(started) + " s");
        scrapeUntilWorkload(ours, java.scrape);
        System.out.println("our scrape after " + secondsSince(started) + " s");
        if (ours.namesrvAddress != null) {
            try {
                ourNamesrv = Await.until("our name server's /metrics counting route queries", WORKLOAD_TIMEOUT,
                    () -> Exposition.scrape(ours.namesrvMetricsPort),
                    e -> e.sum(HIST, Map.of("request_code", "get_routeinfo_by_topic")) >= 1, () -> "");
            } catch (AssertionError e) {
                ourNamesrvFailure = e;
                try {
                    ourNamesrv = Exposition.scrape(ours.namesrvMetricsPort);
                } catch (IOException | InterruptedException | RuntimeException ignored) {
                    // the failure above says enough
                }
            }
            keepScrape("our-namesrv", ourNamesrv);
        }
        for (Side side : List.of(java, ours)) {
            stopWorkload(side);
        }
    }

    /** Reads both brokers' STATS_ALL items until each shows Java's expected sums (or STATS_TIMEOUT passed). */
    private void readStatsAll() {
        List<Side> sides = new ArrayList<>();
        for (Side side : List.of(java, ours)) {
            if (side.failure == null) {
                sides.add(side);
            }
        }
        List<BrokerProbe> probes = new ArrayList<>();
        try {
            for (Side side : sides) {
                probes.add(BrokerProbe.connect(side.brokerAddress, side.brokerName));
            }
            Await.until("statsAll counters showing the workload", STATS_TIMEOUT, () -> {
                boolean all = true;
                for (int i = 0; i < sides.size(); i++) {
                    Side side = sides.get(i);
                    side.stats = statsOf(side, probes.get(i));
                    all &= statsGaps(side).isEmpty();
                }
                return all;
            }, () -> "");
        } catch (AssertionError | RuntimeException e) {
            // The tests report what each side's last reading lacks.
            for (Side side : sides) {
                if (side.stats == null) {
                    side.statsFailure = e;
                }
            }
        } finally {
            probes.forEach(BrokerProbe::close);
        }
    }

    private static Map<String, Long> statsOf(Side side, BrokerProbe broker) throws Exception {
        Map<String, Long> sums = new LinkedHashMap<>();
        List<List<String>> items = new ArrayList<>(STATS_ALL.keySet());
        items.addAll(STATS_INFO);
        for (List<String> item : items) {
            String key = item.get(1).replace("<cluster>", side.cluster);
            sums.put(item.get(0) + " " + item.get(1), broker.statsMinuteSum(item.get(0), key));
        }
        return sums;
    }

    /** The STATS_ALL items whose sums are not Java's expected ones. */
    private static List<String> statsGaps(Side side) {
        List<String> gaps = new ArrayList<>();
        if (side.stats == null) {
            return List.of("not read");
        }
        STATS_ALL.forEach((item, wanted) -> {
            Long got = side.stats.get(item.get(0) + " " + item.get(1));
            if (got == null || got.longValue() != wanted) {
                gaps.add(item.get(0) + " " + item.get(1) + " is " + got + ", wanted " + wanted);
            }
        });
        return gaps;
    }

    private static long secondsSince(long nanos) {
        return Duration.ofNanos(System.nanoTime() - nanos).toSeconds();
    }

    @AfterAll
    void stop() {
        for (Side side : new Side[] {ours, java}) {
            if (side != null) {
                side.close();
            }
        }
    }

    private void startWorkload(Side side) throws Exception {
        try (NamesrvProbe probe = NamesrvProbe.connect(side.namesrvAddress);
             BrokerProbe broker = BrokerProbe.connect(side.brokerAddress, side.brokerName)) {
            for (String topic : List.of(TOPIC, TX_TOPIC, DLQ_TOPIC, DELAY_TOPIC, REPLY_TOPIC, TIMER_TOPIC)) {
                broker.createTopic(topic, 4);
                Await.until(side.who + ": route of " + topic, ROUTE_TIMEOUT, () -> probe.route(topic),
                    (TopicRouteData r) -> r != null && !r.getQueueDatas().isEmpty(), () -> "");
            }
        }
        Path runDir = dir.resolve(side.id + "-driver");
        side.stopFile = runDir.resolve("stop");
        side.driver = side.keep(DriverRun.start("MetricsDriver", "rocketmq-client", Versions.JAVA_5, "ROCKETMQ", runDir,
            side.namesrvAddress, "produce:" + TOPIC + ":" + COUNT, "consume:" + TOPIC + ":" + GROUP + ":" + COUNT,
            "transactions:" + TX_TOPIC, "deadLetter:" + DLQ_TOPIC + ":" + DLQ_GROUP + ":" + DEAD_LETTERS,
            "delayed:" + DELAY_TOPIC + ":" + DELAYED, "timer:" + TIMER_TOPIC + ":" + TIMERS, "reply:" + REPLY_TOPIC + ":" + REPLY_GROUP,
            "hold:" + side.stopFile + ":120"));
    }

    /** Waits until the driver holds its clients; a workload step that failed is kept to report, not thrown. */
    private static void awaitHolding(Side side) {
        Await.until(side.who + ": the workload ran and its clients hold on", DRIVER_TIMEOUT, () -> {
            if (!side.driver.isAlive()) {
                throw new AssertionError(side.who + ": the driver exited\n" + side.driver.describe(60));
            }
            return !side.driver.lines("HOLDING").isEmpty();
        }, () -> side.driver.describe(60));
        for (String[] result : side.driver.lines("RESULT ")) {
            String line = String.join(" ", result);
            System.out.println(side.who + ": " + line);
            if (!line.contains("status=OK")) {
                side.stepFailures.add("workload step failed (see " + side.id + "-driver/driver.log): " + line);
            }
        }
    }

    /**
     * Scrapes until the workload shows, and, given Java's scrape, then until ours also shows every sample name,
     * label-key set and enumerated label value Java's does (or the timeouts pass); keeps the last scrape.
     */
    private static void scrapeUntilWorkload(Side side, Exposition javaScrape) {
        if (side.failure != null) {
            return;
        }
        try {
            Await.until(side.who + ": /metrics showing the workload", WORKLOAD_TIMEOUT, () -> scrapeInto(side),
                e -> side.workloadGaps.isEmpty(), () -> String.join("\n", side.workloadGaps));
            if (javaScrape != null) {
                Await.until(side.who + ": /metrics showing what Java's does", COVERAGE_TIMEOUT, () -> scrapeInto(side),
                    e -> familyDiff(javaScrape, e).isEmpty() && valueDiff(javaScrape, e).isEmpty(), () -> "");
            }
        } catch (AssertionError e) {
            if (side.scrape == null) {
                side.failure = e;
            }
            // Otherwise the tests report what the last scrape lacks.
        }
        keepScrape(side.id + "-broker", side.scrape);
    }

    private static Exposition scrapeInto(Side side) throws IOException, InterruptedException {
        Exposition e = Exposition.scrape(side.brokerMetricsPort);
        side.scrape = e;
        side.workloadGaps = workloadGaps(e);
        return e;
    }

    /** Writes a scrape to target/prometheus-metrics/NAME.txt for the developer to read. */
    private static void keepScrape(String name, Exposition scrape) {
        if (scrape == null) {
            return;
        }
        try {
            Path out = Path.of(System.getProperty("rmq.driver.classes", "target/classes")).getParent()
                .resolve("prometheus-metrics");
            Files.createDirectories(out);
            Files.writeString(out.resolve(name + ".txt"), scrape.text());
        } catch (IOException e) {
            System.out.println("cannot keep the " + name + " scrape: " + e);
        }
    }

    private static void stopWorkload(Side side) {
        if (side.driver == null) {
            return;
        }
        try {
            Files.createDirectories(side.stopFile.getParent());
            Files.writeString(side.stopFile, "stop");
            side.driver.await(Duration.ofSeconds(30));
        } catch (IOException | RuntimeException | Error e) {
            System.out.println(side.who + ": stopping the workload: " + e);
        }
    }

    // ------------------------------------------------------------------------------------------------
    // what is compared

    /** What the workload must have left in a scrape; empty when all of it shows. */
    static List<String> workloadGaps(Exposition e) {
        List<String> gaps = new ArrayList<>();
        expect(gaps, e, "rocketmq_messages_in_total", Map.of("topic", TOPIC), v -> v == COUNT, "== " + COUNT);
        expect(gaps, e, "rocketmq_messages_out_total", Map.of("topic", TOPIC, "consumer_group", GROUP), v -> v == COUNT,
            "== " + COUNT);
        expect(gaps, e, "rocketmq_throughput_in_total", Map.of("topic", TOPIC), v -> v > 0, "> 0");
        expect(gaps, e, "rocketmq_throughput_out_total", Map.of("topic", TOPIC, "consumer_group", GROUP), v -> v > 0, "> 0");
        expect(gaps, e, "rocketmq_message_size_count", Map.of("topic", TOPIC), v -> v == COUNT, "== " + COUNT);
        expect(gaps, e, HIST, Map.of("request_code", "send_message_v2"), v -> v >= COUNT, ">= " + COUNT);
        expect(gaps, e, HIST, Map.of("request_code", "pull_message"), v -> v >= 1, ">= 1");
        // A pull that found nothing is parked (the push consumer asks for 15 s) and counted when it is answered.
        expect(gaps, e, HIST, Map.of("request_code", "pull_message", "is_long_polling", "true"), v -> v >= 1,
            ">= 1 (a parked pull answered)");
        expect(gaps, e, "rocketmq_consumer_lag_messages", Map.of("topic", TOPIC, "consumer_group", GROUP), v -> v == 0,
            "== 0 (all consumed)");
        expect(gaps, e, "rocketmq_producer_connections", Map.of("language", "java", "version", "v5_3_3"), v -> v >= 1,
            ">= 1");
        expect(gaps, e, "rocketmq_consumer_connections", Map.of("consumer_group", GROUP, "language", "java",
            "version", "v5_3_3", "consume_mode", "push"), v -> v >= 1, ">= 1");
        expect(gaps, e, "rocketmq_commit_messages_total", Map.of("topic", TX_TOPIC), v -> v == 1, "== 1");
        expect(gaps, e, "rocketmq_rollback_messages_total", Map.of("topic", TX_TOPIC), v -> v == 1, "== 1");
        expect(gaps, e, "rocketmq_finish_message_latency_milliseconds_count", Map.of("topic", TX_TOPIC), v -> v == 1,
            "== 1");
        expect(gaps, e, "rocketmq_half_messages", Map.of("topic", TX_TOPIC), v -> v == 0, "== 0 (both finished)");
        expect(gaps, e, "rocketmq_send_to_dlq_messages_total", Map.of("topic", DLQ_TOPIC, "consumer_group", DLQ_GROUP),
            v -> v == DEAD_LETTERS, "== " + DEAD_LETTERS);
        // Delivered by the schedule service a second after the send, as a message of type delay.
        expect(gaps, e, "rocketmq_messages_in_total", Map.of("topic", DELAY_TOPIC, "message_type", "delay"),
            v -> v >= DELAYED, ">= " + DELAYED);
        expect(gaps, e, "rocketmq_messages_out_total", Map.of("topic", SCHEDULE_TOPIC, "consumer_group", SCHEDULE_GROUP),
            v -> v == DELAYED, "== " + DELAYED);
        // Released by the timer two seconds after the send.
        expect(gaps, e, "rocketmq_timer_dequeue_total", Map.of("topic", TIMER_TOPIC), v -> v == TIMERS, "== " + TIMERS);
        expect(gaps, e, "rocketmq_timing_messages", Map.of("topic", TIMER_TOPIC), v -> v == 0, "== 0 (all released)");
        return gaps;
    }

    private static void expect(List<String> gaps, Exposition e, String name, Map<String, String> labels,
                               java.util.function.DoublePredicate accept, String wanted) {
        double v = e.sum(name, labels);
        if (Double.isNaN(v) || !accept.test(v)) {
            gaps.add(name + new TreeMap<>(labels) + " is " + (Double.isNaN(v) ? "missing" : v) + ", wanted " + wanted);
        }
    }

    /** Sample names of Java's that are compared: all but its pop buffer scan's and the exporter's own. */
    static SortedSet<String> comparedNames(Exposition e) {
        return e.names().stream()
            .filter(n -> !n.startsWith("rocketmq_pop_buffer_scan_time_consume") && !n.equals("target_info")
                && !n.equals("otel_scope_info"))
            .collect(Collectors.toCollection(TreeSet::new));
    }

    /** Per Java sample name: missing in ours, or with other label-key sets. Empty when ours has them all alike. */
    static Map<String, String> familyDiff(Exposition javaScrape, Exposition ourScrape) {
        Map<String, String> diff = new TreeMap<>();
        SortedSet<String> ourNames = ourScrape.names();
        for (String name : comparedNames(javaScrape)) {
            if (!ourNames.contains(name)) {
                diff.put(name, "missing in ours (Java's label keys: " + javaScrape.labelKeySets(name) + ")");
                continue;
            }
            Set<SortedSet<String>> javaKeys = javaScrape.labelKeySets(name);
            Set<SortedSet<String>> ourKeys = ourScrape.labelKeySets(name);
            if (!javaKeys.equals(ourKeys)) {
                diff.put(name, "label keys differ:\n      Java: " + javaKeys + "\n      ours: " + ourKeys);
            }
        }
        return diff;
    }

    /**
     * Per Java sample name: the combinations of enumerated label values (request and response code, result...)
     * Java's samples of the workload show that no sample of ours shows; for a histogram's _bucket, its bucket
     * bounds (the other labels are its _count's).
     */
    static Map<String, String> valueDiff(Exposition javaScrape, Exposition ourScrape) {
        Map<String, String> diff = new TreeMap<>();
        SortedSet<String> ourNames = ourScrape.names();
        for (String name : comparedNames(javaScrape)) {
            // A name ours lacks is reported by familyDiff; a histogram's _sum has its _count's labels.
            if (!ourNames.contains(name) || name.endsWith("_sum")) {
                continue;
            }
            if (name.endsWith("_bucket")) {
                SortedSet<String> javaBounds = normalized(javaScrape.labelValues(name, "le"));
                SortedSet<String> ourBounds = normalized(ourScrape.labelValues(name, "le"));
                if (!ourBounds.equals(javaBounds)) {
                    diff.put(name + " le", "bucket bounds differ:\n      Java: " + javaBounds + "\n      ours: " + ourBounds);
                }
                continue;
            }
            Set<SortedMap<String, String>> ourTuples = enumerated(ourScrape, name, s -> true);
            List<String> missing = new ArrayList<>();
            for (SortedMap<String, String> tuple : enumerated(javaScrape, name, OF_THE_WORKLOAD)) {
                if (!ourTuples.contains(tuple)) {
                    List<SortedMap<String, String>> near = ourTuples.stream().filter(t -> differInOne(tuple, t)).toList();
                    missing.add(tuple + (near.isEmpty() ? "" : "  (ours has " + near + ")"));
                }
            }
            if (!missing.isEmpty()) {
                diff.put(name, "ours lacks\n      " + String.join("\n      ", missing));
            }
        }
        return diff;
    }

    /** The enumerated label values of each sample named {@code name} that {@code which} accepts, bucket bounds aside. */
    private static Set<SortedMap<String, String>> enumerated(Exposition e, String name,
                                                            Predicate<Exposition.Sample> which) {
        Set<SortedMap<String, String>> tuples = new java.util.LinkedHashSet<>();
        for (Exposition.Sample sample : e.samples(name, Map.of())) {
            if (which.test(sample)) {
                SortedMap<String, String> tuple = new TreeMap<>(sample.labels());
                tuple.keySet().retainAll(ENUMERATED_KEYS);
                tuple.remove("le");
                tuples.add(tuple);
            }
        }
        return tuples;
    }

    /** Same keys, and all values but one the same. */
    private static boolean differInOne(SortedMap<String, String> a, SortedMap<String, String> b) {
        return a.keySet().equals(b.keySet())
            && a.keySet().stream().filter(k -> !a.get(k).equals(b.get(k))).count() == 1;
    }

    /** Bucket bounds compared as numbers (Java prints 1.0, the Rust crate 1). */
    private static SortedSet<String> normalized(SortedSet<String> values) {
        return values.stream().map(v -> v.equals("+Inf") ? v : Double.toString(Double.parseDouble(v)))
            .collect(Collectors.toCollection(() -> new TreeSet<>(PrometheusMetricsTest::compareBounds)));
    }

    private static int compareBounds(String a, String b) {
        return Double.compare(a.equals("+Inf") ? Double.POSITIVE_INFINITY : Double.parseDouble(a),
            b.equals("+Inf") ? Double.POSITIVE_INFINITY : Double.parseDouble(b));
    }

    private static String lines(Map<String, String> diff) {
        return diff.entrySet().stream().map(e -> "  " + e.getKey() + ": " + e.getValue()).collect(Collectors.joining("\n"));
    }

    // ------------------------------------------------------------------------------------------------
    // tests

    @Test
    @DisplayName("the Java 5.3.3 broker counts the workload as this test expects")
    void javaCountsTheWorkload() {
        Exposition e = java.scrapeOrFail();
        List<String> gaps = new ArrayList<>(java.stepFailures);
        gaps.addAll(java.workloadGaps);
        assertTrue(gaps.isEmpty(), "Java 5.3.3's /metrics after the workload:\n  " + String.join("\n  ", gaps)
            + "\n(scrape kept in target/prometheus-metrics/java-broker.txt; " + e.samples().size() + " samples)");
    }

    @Test
    @DisplayName("our broker counts the workload as Java's does")
    void oursCountsTheWorkload() {
        Exposition e = ours.scrapeOrFail();
        List<String> gaps = new ArrayList<>(ours.stepFailures);
        gaps.addAll(ours.workloadGaps);
        assertTrue(gaps.isEmpty(), "our broker's /metrics after the workload:\n  " + String.join("\n  ", gaps)
            + "\n(scrape kept in target/prometheus-metrics/our-broker.txt; " + e.samples().size() + " samples)");
    }

    @Test
    @DisplayName("our broker counts exactly what Java's counts where the workload fixes the count")
    void oursCountsEqualJavas() {
        Exposition javaScrape = java.scrapeOrFail();
        Exposition ourScrape = ours.scrapeOrFail();
        List<String> differ = new ArrayList<>();
        StringBuilder table = new StringBuilder();
        for (Map.Entry<String, Map<String, String>> c : SAME_COUNTS) {
            double j = javaScrape.sum(c.getKey(), c.getValue());
            double o = ourScrape.sum(c.getKey(), c.getValue());
            String row = c.getKey() + new TreeMap<>(c.getValue()) + ": Java " + j + ", ours " + o;
            table.append("\n  ").append(row);
            if (Double.compare(j, o) != 0) {
                differ.add(row);
            }
        }
        System.out.println("counts of the workload:" + table);
        System.out.println("not compared, for the record:");
        for (Map.Entry<String, Map<String, String>> c : INFO_VALUES) {
            System.out.println("  " + c.getKey() + new TreeMap<>(c.getValue()) + ": Java " + javaScrape.sum(c.getKey(),
                c.getValue()) + ", ours " + ourScrape.sum(c.getKey(), c.getValue()));
        }
        assertTrue(differ.isEmpty(), differ.size() + " counts differ from Java 5.3.3's:\n  " + String.join("\n  ", differ));
    }

    @Test
    @DisplayName("statsAll counters (VIEW_BROKER_STATS_DATA): a stored reply and delayed deliveries counted as Java 5.3.3 counts them")
    void oursStatsAllCountsEqualJavas() {
        for (Side side : List.of(java, ours)) {
            if (side.stats == null) {
                throw new AssertionError(side.who + ": statsAll counters not read", side.failure != null ? side.failure : side.statsFailure);
            }
        }
        StringBuilder table = new StringBuilder();
        java.stats.forEach((item, j) -> table.append("\n  ").append(item).append(": Java ").append(j).append(", ours ")
            .append(ours.stats.get(item)));
        System.out.println("statsAll counters (last minute's sums, -1 = no item):" + table);
        List<String> gaps = new ArrayList<>();
        for (Side side : List.of(java, ours)) {
            statsGaps(side).forEach(g -> gaps.add(side.who + ": " + g));
        }
        assertTrue(gaps.isEmpty(), "statsAll counters differ from what Java 5.3.3 counts:\n  " + String.join("\n  ", gaps)
            + table);
    }

    @Test
    @DisplayName("our broker exports every sample name Java 5.3.3 exports (but pop's), with the same label keys")
    void oursExportsJavasSampleNamesWithTheirLabelKeys() {
        Exposition javaScrape = java.scrapeOrFail();
        Exposition ourScrape = ours.scrapeOrFail();
        Map<String, String> diff = familyDiff(javaScrape, ourScrape);
        SortedSet<String> extra = new TreeSet<>(comparedNames(ourScrape));
        extra.removeAll(javaScrape.names());
        System.out.println("sample names ours exports and Java 5.3.3 did not: " + extra);
        assertTrue(diff.isEmpty(), diff.size() + " of Java 5.3.3's " + comparedNames(javaScrape).size()
            + " sample names differ in ours:\n" + lines(diff)
            + "\n(only in ours: " + extra + ")");
    }

    @Test
    @DisplayName("our exposition's lines read as Java 5.3.3's: info lines, TYPE/HELP names, label order, bucket bounds, values")
    void oursWritesLinesAsJavasExporter() {
        List<String> javaLines = java.scrapeOrFail().text().lines().toList();
        List<String> ourLines = ours.scrapeOrFail().text().lines().toList();
        for (String info : List.of("# TYPE target info", "# HELP target Target metadata", "target_info{} 1",
            "# TYPE otel_scope_info info", "otel_scope_info{otel_scope_name=\"broker-meter\"} 1")) {
            assertTrue(javaLines.contains(info), "Java's exposition has " + info);
            assertTrue(ourLines.contains(info), "ours has " + info);
        }
        // The TYPE and HELP lines of the families both export (Java's view descriptions), line for line.
        Set<String> javaHeaders = headerLines(javaLines);
        Set<String> ourHeaders = headerLines(ourLines);
        Set<String> shared = ourHeaders.stream().map(l -> l.split(" ")[2]).filter(n -> javaHeaders.stream()
            .anyMatch(j -> j.split(" ")[2].equals(n))).collect(Collectors.toSet());
        SortedSet<String> differ = new TreeSet<>();
        for (String line : javaHeaders) {
            if (shared.contains(line.split(" ")[2]) && !ourHeaders.contains(line)) {
                differ.add(line);
            }
        }
        assertTrue(differ.isEmpty(), "Java's TYPE/HELP lines ours writes otherwise:\n" + String.join("\n", differ));
        // Every sample line: otel_scope_name first, the other labels by name, a Java double and a timestamp.
        Pattern sample = Pattern.compile(
            "[a-z_]+\\{otel_scope_name=\"[^\"]*\"(,[a-z_]+=\"[^\"]*\")*\\} (-?[0-9]+\\.[0-9]+(E-?[0-9]+)?|NaN) [0-9]{13}");
        for (String line : ourLines) {
            if (line.startsWith("rocketmq_")) {
                assertTrue(sample.matcher(line).matches(), "not in Java's sample form: " + line);
                String keys = line.substring(line.indexOf('{') + 1, line.lastIndexOf('}'));
                List<String> names = Arrays.stream(keys.split("\",")).map(p -> p.substring(0, p.indexOf('=')))
                    .map(k -> k.startsWith(",") ? k.substring(1) : k).toList();
                List<String> rest = names.subList(1, names.size()).stream().filter(k -> !k.equals("le")).toList();
                assertEquals(rest.stream().sorted().toList(), rest, "labels after otel_scope_name by name: " + line);
            }
        }
        // Bucket bounds as Java writes them (le="1024.0").
        Set<String> javaLe = leValues(javaLines);
        Set<String> ourLe = leValues(ourLines);
        assertTrue(ourLe.containsAll(javaLe.stream().filter(le -> !le.isEmpty()).toList()) || javaLe.isEmpty(),
            "bucket bounds: Java " + javaLe + ", ours " + ourLe);
    }

    private static Set<String> headerLines(List<String> lines) {
        return lines.stream().filter(l -> l.startsWith("# TYPE rocketmq_") || l.startsWith("# HELP rocketmq_"))
            .collect(Collectors.toCollection(TreeSet::new));
    }

    private static Set<String> leValues(List<String> lines) {
        Set<String> out = new TreeSet<>();
        Matcher m;
        for (String l : lines) {
            m = Pattern.compile("le=\"([^\"]*)\"").matcher(l);
            if (l.startsWith("rocketmq_rpc_latency") && m.find()) {
                out.add(m.group(1));
            }
        }
        return out;
    }

    @Test
    @DisplayName("our label values cover Java 5.3.3's: request/response code combinations, processors, types, buckets")
    void oursShowsJavasLabelValues() {
        Map<String, String> diff = valueDiff(java.scrapeOrFail(), ours.scrapeOrFail());
        assertTrue(diff.isEmpty(), diff.size() + " sample names of Java 5.3.3 show label values ours does not:\n" + lines(diff));
    }

    @Test
    @DisplayName("our name server counts the clients' route queries (node_type namesrv)")
    void ourNameServerCountsRouteQueries() {
        if (ours.namesrvAddress == null) {
            throw new AssertionError("our name server did not start", ours.failure);
        }
        assertTrue(ourNamesrvFailure == null && ourNamesrv != null, "our name server's /metrics: " + ourNamesrvFailure
            + (ourNamesrv == null ? "" : "\n" + ourNamesrv.grep("rocketmq_rpc_latency")));
        double routeQueries = ourNamesrv.sum(HIST, Map.of("request_code", "get_routeinfo_by_topic", "node_type", "namesrv"));
        assertTrue(routeQueries >= 1, "route queries counted with node_type=namesrv: " + routeQueries + "\n"
            + ourNamesrv.grep("get_routeinfo_by_topic"));
    }
}
