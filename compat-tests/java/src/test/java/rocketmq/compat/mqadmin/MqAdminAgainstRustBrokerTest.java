package rocketmq.compat.mqadmin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONObject;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.protocol.body.KVTable;
import org.apache.rocketmq.common.protocol.route.QueueData;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import rocketmq.compat.broker.BrokerProbe;
import rocketmq.compat.broker.RustBroker;
import rocketmq.compat.client.DriverRun;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.ChildProcess;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.CompatDirs;
import rocketmq.compat.runtime.RocketmqHome;
import rocketmq.compat.runtime.Versions;

/**
 * The official mqadmin 4.9.7 (JSON headers) and 5.3.3 (ROCKETMQ headers) against our name server and OUR
 * broker ({@code mqbroker}): the broker commands (clusterList, brokerStatus, getBrokerConfig), topics
 * (updateTopic -b/-c, topicRoute, topicStatus, topicList, deleteTopic), groups (updateSubGroup,
 * consumerProgress, consumerConnection, deleteSubGroup) and message queries (queryMsgByKey,
 * queryMsgByUniqueKey, queryMsgById). The expected output is what the same tool prints against the Java
 * broker of its line (checked by hand: 4.9.7 tool with a 4.9.7 broker, 5.3.3 tool with a 5.3.3 broker).
 * mqadmin exits 0 even when a command fails, so every check reads what it printed, and where it can,
 * double-checks the effect in-process (name server route, the broker's answers, its config/*.json files).
 * Each tool works on its own topics and group, both tools at once.
 */
@DisplayName("mqadmin against our broker")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@ExtendWith(DumpLogsOnFailure.class)
class MqAdminAgainstRustBrokerTest {
    private static final String CLUSTER = "AdminRustCluster";
    private static final String BROKER = "admin-rust-broker";
    private static final int MESSAGES = 20;
    /** updateTopic -r 3 -w 5: messages go to 5 queues, consumers read 3. */
    private static final int READ_QUEUES = 3;
    private static final int WRITE_QUEUES = 5;
    private static final Duration ROUTE_TIMEOUT = Duration.ofSeconds(15);
    private static final Duration OFFSET_TIMEOUT = Duration.ofSeconds(20);
    private static final long RPC_TIMEOUT_MILLIS = 3000;
    private static final Pattern CONFIG_LINE = Pattern.compile("^(\\S+)\\s+=(?:  (.*))?$");
    private static final Pattern STATUS_LINE = Pattern.compile("^(\\S+)\\s*:(?: (.*))?$");
    /** Values of Java 4.9.7's broker for keys our broker.conf does not set (as getBrokerConfig printed them). */
    private static final Map<String, String> JAVA_DEFAULTS = Map.ofEntries(
        Map.entry("brokerRole", "ASYNC_MASTER"),
        Map.entry("flushDiskType", "ASYNC_FLUSH"),
        Map.entry("brokerPermission", "6"),
        Map.entry("defaultTopicQueueNums", "8"),
        Map.entry("deleteWhen", "04"),
        Map.entry("fileReservedTime", "72"),
        Map.entry("diskMaxUsedSpaceRatio", "75"),
        Map.entry("maxMessageSize", "4194304"),
        Map.entry("mappedFileSizeConsumeQueue", "6000000"),
        Map.entry("messageDelayLevel", "1s 5s 10s 30s 1m 2m 3m 4m 5m 6m 7m 8m 9m 10m 20m 30m 1h 2h"),
        Map.entry("flushConsumerOffsetInterval", "5000"),
        Map.entry("longPollingEnable", "true"),
        Map.entry("transientStorePoolEnable", "false"),
        Map.entry("clusterTopicEnable", "true"),
        Map.entry("brokerTopicEnable", "true"),
        Map.entry("autoCreateSubscriptionGroup", "true"),
        Map.entry("msgTraceTopicName", "RMQ_SYS_TRACE_TOPIC"));

    @TempDir
    static Path dir;
    private NameServer namesrv;
    private RustBroker broker;
    private NamesrvProbe probe;
    private BrokerProbe brokerProbe;
    private MQClientAPIImpl brokerApi;
    private EachTools eachTools;
    /** What each tool's producer sent (SENT key queueId offset), by tool version. */
    private final Map<String, DriverRun> produced = new ConcurrentHashMap<>();

    @BeforeAll
    void startNameServerAndBroker() {
        namesrv = NameServer.start(dir.resolve("namesrv"));
        broker = RustBroker.start(brokerDir(), namesrv.address(), CLUSTER, BROKER);
        probe = NamesrvProbe.connect(namesrv.address());
        brokerProbe = BrokerProbe.connect(broker.address(), BROKER);
        brokerApi = new MQClientAPIImpl(new NettyClientConfig(), null, null, new ClientConfig());
        brokerApi.start();
        Await.until("our broker " + BROKER + " at " + broker.address() + " registered", Duration.ofSeconds(30),
            probe::clusterInfo, info -> info.getBrokerAddrTable() != null && info.getBrokerAddrTable().containsKey(BROKER)
                && broker.address().equals(info.getBrokerAddrTable().get(BROKER).getBrokerAddrs().get(0L)),
            this::diagnostics);
        eachTools = new EachTools(List.of(
            new MqAdmin(Versions.JAVA_49, "JSON", namesrv.address(), dir.resolve("mqadmin-49")),
            new MqAdmin(Versions.JAVA_5, "ROCKETMQ", namesrv.address(), dir.resolve("mqadmin-5"))));
    }

    @AfterAll
    void stopEverything() {
        if (brokerApi != null) {
            brokerApi.shutdown();
        }
        for (AutoCloseable c : new AutoCloseable[] {brokerProbe, probe, broker, namesrv}) {
            if (c != null) {
                try {
                    c.close();
                } catch (Exception e) {
                    System.out.println("closing " + c + ": " + e);
                }
            }
        }
    }

    // ------------------------------------------------------------------------------------------------

    @Test
    @Order(1)
    void clusterListShowsOurBrokerWithItsAddressAndRuntimeFigures() throws Exception {
        KVTable runtime = brokerApi.getBrokerRuntimeInfo(broker.address(), RPC_TIMEOUT_MILLIS);
        eachTools.concurrently("clusterList", mqadmin -> {
            boolean five = isFive(mqadmin);
            MqAdminRun run = mqadmin.run("clusterList");
            assertSucceeded(run);
            // the 4.9.7 tool dies with a NullPointerException on a table without getTransferedTps (5.x brokers)
            assertEquals("", run.stderr(), "nothing on stderr" + run.describe());
            assertTrue(run.stdoutLines().get(0).startsWith("#Cluster Name"), "header line" + run.describe());
            String[] cols = run.stdoutLines().stream().map(l -> l.trim().split("\\s+"))
                .filter(c -> c.length > 4 && c[0].equals(CLUSTER) && c[1].equals(BROKER)).findFirst()
                .orElseThrow(() -> new AssertionError("no line '" + CLUSTER + " " + BROKER + " ...'" + run.describe()));
            assertEquals(five ? 14 : 10, cols.length, "columns of " + String.join(" ", cols) + run.describe());
            assertEquals("0", cols[2], "#BID" + run.describe());
            assertEquals(broker.address(), cols[3], "#Addr" + run.describe());
            assertEquals(runtime.getTable().get("brokerVersionDesc"), cols[4], "#Version" + run.describe());
            assertTrue(cols[5].matches("\\d+\\.\\d\\d\\(0,0ms\\)"), "#InTPS(LOAD) " + cols[5] + run.describe());
            // 5.3.3 adds the ack pool, "N" for a broker without one (as Java 4.9)
            assertTrue(cols[6].matches(five ? "\\d+\\.\\d\\d\\(0,0ms\\|(N,N|0,0)ms\\)" : "\\d+\\.\\d\\d\\(0,0ms\\)"),
                "#OutTPS(LOAD) " + cols[6] + run.describe());
            double space = Double.parseDouble(cols[cols.length - (five ? 2 : 1)]);
            assertTrue(space > 0 && space <= 1, "#SPACE (commitLogDiskRatio) " + space + run.describe());
            if (five) {
                assertEquals("0-0(0.0w, 0.0, 0.0)", cols[7] + " " + cols[8] + " " + cols[9], "#Timer" + run.describe());
                assertEquals("true", cols[13], "#ACTIVATED" + run.describe());
            }
        });
    }

    @Test
    @Order(2)
    void getBrokerConfigPrintsEveryKeyAndValueOfOurBrokersConfig() {
        Map<String, String> own = printedConfig();
        // as Java, which leaves them null and prints no line, the unset paths and DLedger keys are left out
        for (String unset : List.of("storePathCommitLog", "storePathDLedgerCommitLog", "haMasterAddress", "dLegerGroup",
            "dLegerPeers", "dLegerSelfId", "preferredLeaderId", "readOnlyCommitLogStorePaths", "storePathBrokerIdentity",
            "storePathEpochFile")) {
            assertEquals("", own.remove(unset), "mqbroker -p: " + unset + " is not set");
        }
        eachTools.concurrently("getBrokerConfig", mqadmin -> {
            MqAdminRun run = mqadmin.run("getBrokerConfig", "-b", broker.address());
            assertSucceeded(run);
            assertEquals("============" + broker.address() + "============", run.stdoutLines().get(0), run.describe());
            Map<String, String> config = parseLines(run, CONFIG_LINE);
            assertEquals(new TreeMap<>(own), new TreeMap<>(config), "getBrokerConfig vs. mqbroker -c broker.conf -p");
            for (Map.Entry<String, String> e : Map.of("brokerClusterName", CLUSTER, "brokerName", BROKER, "brokerId", "0",
                "listenPort", broker.address().split(":")[1], "namesrvAddr", namesrv.address(),
                "storePathRootDir", broker.storeDir().toString(), "autoCreateTopicEnable", "true",
                "mappedFileSizeCommitLog", Integer.toString(64 * 1024 * 1024), "brokerIP1", "127.0.0.1").entrySet()) {
                assertEquals(e.getValue(), config.get(e.getKey()), "broker.conf's " + e.getKey() + run.describe());
            }
            JAVA_DEFAULTS.forEach((key, value) ->
                assertEquals(value, config.get(key), "Java's default of " + key + run.describe()));
        });
    }

    @Test
    @Order(3)
    void updateTopicOnTheBrokerCreatesItWithThreeReadAndFiveWriteQueues() {
        eachTools.concurrently("updateTopic -b -r 3 -w 5", mqadmin -> {
            String topic = topic(mqadmin);
            MqAdminRun create = mqadmin.run("updateTopic", "-b", broker.address(), "-t", topic,
                "-r", Integer.toString(READ_QUEUES), "-w", Integer.toString(WRITE_QUEUES));
            assertSucceeded(create);
            assertEquals("create topic to " + broker.address() + " success.", create.stdoutLines().get(0), create.describe());
            assertTrue(create.stdout().contains("TopicConfig [topicName=" + topic + ", readQueueNums=3, writeQueueNums=5, "
                + "perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false"), create.describe());
            assertTopicInFile(topic, READ_QUEUES, WRITE_QUEUES);
            awaitRoute(topic, READ_QUEUES, WRITE_QUEUES);

            MqAdminRun route = mqadmin.run("topicRoute", "-t", topic);
            assertSucceeded(route);
            String json = compact(route.stdout());
            for (String expected : List.of("\"brokerName\":\"" + BROKER + "\"", "\"cluster\":\"" + CLUSTER + "\"",
                "{0:\"" + broker.address() + "\"}", "\"perm\":6", "\"readQueueNums\":3", "\"writeQueueNums\":5")) {
                assertTrue(json.contains(expected), "route JSON should contain " + expected + route.describe());
            }
        });
    }

    @Test
    @Order(4)
    void updateTopicOnTheClusterCreatesItOnOurBrokerWithEightQueues() {
        eachTools.concurrently("updateTopic -c", mqadmin -> {
            String topic = clusterTopic(mqadmin);
            MqAdminRun create = mqadmin.run("updateTopic", "-c", CLUSTER, "-t", topic);
            assertSucceeded(create);
            assertEquals("create topic to " + broker.address() + " success.", create.stdoutLines().get(0), create.describe());
            assertTrue(create.stdout().contains("TopicConfig [topicName=" + topic + ", readQueueNums=8, writeQueueNums=8, "
                + "perm=RW-, topicFilterType=SINGLE_TAG, topicSysFlag=0, order=false"), create.describe());
            assertTopicInFile(topic, 8, 8);
            awaitRoute(topic, 8, 8);
        });
    }

    @Test
    @Order(5)
    void topicStatusShowsTheOffsetsOfAllFiveWriteQueuesAfterSends() {
        eachTools.concurrently("topicStatus", mqadmin -> {
            String topic = topic(mqadmin);
            DriverRun producer = DriverRun.run("FeatureDriver", "rocketmq-client", mqadmin.version(), serializeType(mqadmin),
                dir.resolve("drivers").resolve("produce-" + tag(mqadmin)), namesrv.address(),
                "produce:" + topic + ":K:" + MESSAGES);
            System.out.println("mqadmin against our broker: " + producer.summary());
            producer.assertOk("produce");
            produced.put(mqadmin.version(), producer);
            Map<Integer, Long> sentPerQueue = new TreeMap<>();
            for (String[] sent : producer.lines("SENT ")) {
                sentPerQueue.merge(Integer.parseInt(sent[1]), 1L, Long::sum);
            }

            MqAdminRun run = mqadmin.run("topicStatus", "-t", topic);
            assertSucceeded(run);
            assertTrue(run.stdoutLines().get(0).startsWith("#Broker Name"), "header" + run.describe());
            Map<Integer, Long> maxOffsets = new TreeMap<>();
            for (String[] cols : rows(run, BROKER)) {
                int queue = Integer.parseInt(cols[1]);
                long max = Long.parseLong(cols[3]);
                assertEquals("0", cols[2], "#Min Offset of queue " + queue + run.describe());
                assertEquals(max > 0, cols.length == 6, "#Last Updated (date time) iff the queue has messages" + run.describe());
                maxOffsets.put(queue, max);
                assertEquals(brokerProbe.maxOffset(topic, queue), max, "GET_MAX_OFFSET of queue " + queue + run.describe());
            }
            assertEquals(Set.of(0, 1, 2, 3, 4), maxOffsets.keySet(), "one line per write queue" + run.describe());
            assertEquals(MESSAGES, maxOffsets.values().stream().mapToLong(Long::longValue).sum(),
                "the max offsets add up to the messages sent" + run.describe());
            for (int q = 0; q < WRITE_QUEUES; q++) {
                assertEquals(sentPerQueue.getOrDefault(q, 0L), maxOffsets.get(q), "queue " + q + " vs. the send results "
                    + sentPerQueue + run.describe());
            }
        });
    }

    @Test
    @Order(6)
    void topicListListsEveryTopicOfOurBroker() throws Exception {
        Set<String> inFile = topicsInFile().keySet();
        eachTools.concurrently("topicList", mqadmin -> {
            MqAdminRun run = mqadmin.run("topicList");
            assertSucceeded(run);
            Set<String> listed = Set.copyOf(run.stdoutLines().stream().map(String::trim).toList());
            for (String topic : List.of(topic(mqadmin), clusterTopic(mqadmin), "TBW102", CLUSTER, BROKER)) {
                assertTrue(listed.contains(topic), "topic " + topic + " listed" + run.describe());
            }
            for (String topic : inFile) {
                assertTrue(listed.contains(topic), "topic " + topic + " of topics.json listed" + run.describe());
            }
        });
    }

    @Test
    @Order(7)
    void updateSubGroupCreatesTheGroupInSubscriptionGroupJson() {
        eachTools.concurrently("updateSubGroup -b", mqadmin -> {
            String group = group(mqadmin);
            MqAdminRun run = mqadmin.run("updateSubGroup", "-b", broker.address(), "-g", group);
            assertSucceeded(run);
            assertEquals("create subscription group to " + broker.address() + " success.", run.stdoutLines().get(0),
                run.describe());
            assertTrue(run.stdoutLines().get(1).matches("SubscriptionGroupConfig ?[\\[{]groupName=" + group
                + ", consumeEnable=true, consumeFromMinEnable=false, consumeBroadcastEnable=false, .*"), run.describe());
            JSONObject config = Await.until("group " + group + " in subscriptionGroup.json", ROUTE_TIMEOUT,
                () -> groupsInFile().getJSONObject(group), g -> g != null, this::diagnostics);
            assertEquals(group, config.getString("groupName"), config.toJSONString());
            assertTrue(config.getBooleanValue("consumeEnable"), config.toJSONString());
            assertFalse(config.getBooleanValue("consumeBroadcastEnable"), config.toJSONString());
            assertFalse(config.getBooleanValue("consumeFromMinEnable"), config.toJSONString());
            assertEquals(16, config.getIntValue("retryMaxTimes"), config.toJSONString());
            assertEquals(1, config.getIntValue("retryQueueNums"), config.toJSONString());
            assertEquals(0, config.getIntValue("brokerId"), config.toJSONString());
            assertEquals(1, config.getIntValue("whichBrokerWhenConsumeSlowly"), config.toJSONString());
            assertTrue(config.getBooleanValue("notifyConsumerIdsChangedEnable"), config.toJSONString());
        });
    }

    @Test
    @Order(8)
    void consumerProgressShowsNoDiffOnceTheGroupConsumedAndCommitted() {
        eachTools.concurrently("consumerProgress -g", mqadmin -> {
            String topic = topic(mqadmin);
            String group = group(mqadmin);
            long readable = sent(mqadmin).stream().filter(w -> Integer.parseInt(w[1]) < READ_QUEUES).count();
            DriverRun consumer = DriverRun.run("FeatureDriver", "rocketmq-client", mqadmin.version(), serializeType(mqadmin),
                dir.resolve("drivers").resolve("consume-" + tag(mqadmin)), namesrv.address(),
                "consume:" + topic + ":" + group + ":K:" + readable);
            System.out.println("mqadmin against our broker: " + consumer.summary());
            consumer.assertOk("consume");
            Map<Integer, Long> ends = new TreeMap<>();
            for (int q = 0; q < READ_QUEUES; q++) {
                ends.put(q, brokerProbe.maxOffset(topic, q));
            }
            Await.until("group " + group + " committed the read queues of " + topic + " to their ends " + ends,
                OFFSET_TIMEOUT, () -> committed(group, topic), ends::equals, this::diagnostics);

            MqAdminRun run = mqadmin.run("consumerProgress", "-g", group);
            assertSucceeded(run);
            assertTrue(run.stdoutLines().get(0).startsWith("#Topic"), "header" + run.describe());
            Map<Integer, Long> consumed = new TreeMap<>();
            for (String[] cols : run.stdoutLines().stream().map(l -> l.trim().split("\\s+")).toList()) {
                if (cols[0].equals(topic)) {
                    assertEquals(BROKER, cols[1], run.describe());
                    int queue = Integer.parseInt(cols[2]);
                    assertEquals(Long.toString(ends.get(queue)), cols[3], "#Broker Offset of queue " + queue + run.describe());
                    assertEquals(cols[3], cols[4], "#Consumer Offset of queue " + queue + run.describe());
                    assertEquals("0", cols[5], "#Diff of queue " + queue + run.describe());
                    consumed.put(queue, Long.parseLong(cols[4]));
                } else if (cols[0].equals("%RETRY%" + group)) {
                    assertEquals(List.of(BROKER, "0", "0", "0", "0"), List.of(cols).subList(1, 6), run.describe());
                }
            }
            assertEquals(ends, consumed, "one line per read queue" + run.describe());
            String diffTotal = isFive(mqadmin) ? "Consume Diff Total: 0" : "Diff Total: 0";
            assertTrue(run.stdoutLines().contains(diffTotal), "'" + diffTotal + "'" + run.describe());
        });
    }

    @Test
    @Order(9)
    void statsAllAndBrokerConsumeStatsCountWhatWasSentAndConsumed() {
        eachTools.concurrently("statsAll, brokerConsumeStats", mqadmin -> {
            String topic = topic(mqadmin);
            String group = group(mqadmin);
            // Fresh sends, so the last minute's window has them (the hour and day windows of an item
            // first count 10 minutes and an hour later, as in Java).
            DriverRun producer = DriverRun.run("FeatureDriver", "rocketmq-client", mqadmin.version(), serializeType(mqadmin),
                dir.resolve("drivers").resolve("stats-produce-" + tag(mqadmin)), namesrv.address(),
                "produce:" + topic + ":S:" + MESSAGES);
            producer.assertOk("produce");
            // One sampling period (10 s) later statsAll shows the sends of the last minute.
            Await.until("statsAll -t " + topic + " shows " + MESSAGES + " messages in", Duration.ofSeconds(30), () -> {
                MqAdminRun run = mqadmin.run("statsAll", "-t", topic);
                return rows(run, topic).stream().anyMatch(c -> c.length >= 7 && c[1].equals(group)
                    && Long.parseLong(c[5]) >= MESSAGES && Double.parseDouble(c[3]) > 0) ? run : null;
            }, run -> run != null, this::diagnostics);
            MqAdminRun stats = mqadmin.run("statsAll", "-t", topic);
            assertSucceeded(stats);
            assertTrue(stats.stdoutLines().get(0).startsWith("#Topic"), stats.describe());

            MqAdminRun consumeStats = mqadmin.run("brokerConsumeStats", "-b", broker.address());
            assertSucceeded(consumeStats);
            long ourDiff = 0;
            int queues = 0;
            for (String[] cols : rows(consumeStats, topic)) {
                if (!cols[1].equals(group)) {
                    continue;
                }
                int queue = Integer.parseInt(cols[3]);
                long brokerOffset = Long.parseLong(cols[4]);
                long consumerOffset = Long.parseLong(cols[5]);
                assertEquals(BROKER, cols[2], consumeStats.describe());
                try {
                    assertEquals(brokerProbe.maxOffset(topic, queue), brokerOffset, "#Broker Offset of queue " + queue + consumeStats.describe());
                } catch (Exception e) {
                    throw new AssertionError(e);
                }
                assertEquals(brokerOffset - consumerOffset, Long.parseLong(cols[6]), "#Diff" + consumeStats.describe());
                ourDiff += brokerOffset - consumerOffset;
                queues++;
            }
            // The tool prints the queues the group has consumed from: the read queues.
            assertEquals(READ_QUEUES, queues, "queues of " + topic + " for " + group + consumeStats.describe());
            long total = consumeStats.stdoutLines().stream().filter(l -> l.startsWith("Diff Total: ")).mapToLong(
                l -> Long.parseLong(l.substring("Diff Total: ".length()).trim())).findFirst()
                .orElseThrow(() -> new AssertionError("no Diff Total" + consumeStats.describe()));
            assertTrue(total >= ourDiff && ourDiff > 0, "Diff Total " + total + " vs ours " + ourDiff + consumeStats.describe());
        });
    }

    @Test
    @Order(10)
    void consumerConnectionOfAnOfflineGroupFailsWithConsumerNotOnline() {
        eachTools.concurrently("consumerConnection -g (offline)", mqadmin -> {
            String group = group(mqadmin);
            MqAdminRun run = mqadmin.run("consumerConnection", "-g", group);
            assertEquals("", run.stdout(), run.describe());
            assertTrue(run.stderr().contains("ConsumerConnectionSubCommand command failed"), run.describe());
            assertTrue(run.stderr().contains("CODE: 206  DESC: the consumer group[" + group + "] not online BROKER: "
                + broker.address()), "CONSUMER_NOT_ONLINE with Java's remark" + run.describe());
        });
    }

    @Test
    @Order(11)
    void brokerStatusPrintsOurBrokersRuntimeTable() throws Exception {
        eachTools.concurrently("brokerStatus -b", mqadmin -> {
            MqAdminRun run = mqadmin.run("brokerStatus", "-b", broker.address());
            // not assertSucceeded: Java's own key putMessageFailedTimes reads as a "Failed" line
            assertTrue(run.exitCode() == 0 && !run.stdout().contains("Exception") && !run.stderr().contains("Exception"),
                "mqadmin failed" + run.describe());
            Map<String, String> status = parseLines(run, STATUS_LINE);
            KVTable after = brokerApi.getBrokerRuntimeInfo(broker.address(), RPC_TIMEOUT_MILLIS);
            assertEquals(new TreeMap<>(after.getTable()).keySet(), new TreeMap<>(status).keySet(),
                "the keys of GET_BROKER_RUNTIME_INFO" + run.describe());
            for (String key : List.of("brokerVersionDesc", "brokerVersion", "bootTimestamp", "brokerActive")) {
                assertEquals(after.getTable().get(key), status.get(key), key + run.describe());
            }
            assertTrue(status.get("runtime").matches("\\[ \\d+ days, \\d+ hours, \\d+ minutes, \\d+ seconds \\]"),
                "runtime as Java writes it" + run.describe());
            long maxOffset = Long.parseLong(status.get("commitLogMaxOffset"));
            assertTrue(maxOffset > 0 && maxOffset <= Long.parseLong(after.getTable().get("commitLogMaxOffset")),
                "commitLogMaxOffset" + run.describe());
            assertEquals("0", status.get("commitLogMinOffset"), run.describe());
            long earliest = Long.parseLong(status.get("earliestMessageTimeStamp"));
            assertTrue(earliest > 0 && earliest <= System.currentTimeMillis(), "earliestMessageTimeStamp" + run.describe());
            double disk = Double.parseDouble(status.get("commitLogDiskRatio"));
            assertTrue(disk > 0 && disk <= 1, "commitLogDiskRatio" + run.describe());
            // As Java: the ratio again under the commit log's path, and the consume queues' own.
            assertTrue(status.keySet().stream().anyMatch(k -> k.startsWith("commitLogDiskRatio_/") && k.endsWith("commitlog")),
                "commitLogDiskRatio_<path>" + run.describe());
            double queues = Double.parseDouble(status.get("consumeQueueDiskRatio"));
            assertTrue(queues > 0 && queues <= 1, "consumeQueueDiskRatio" + run.describe());
            // both tools' producers sent MESSAGES each, and their consumers pulled the readable ones
            assertTrue(Long.parseLong(status.get("msgPutTotalTodayNow")) >= 2L * MESSAGES, "msgPutTotalTodayNow" + run.describe());
            assertTrue(Long.parseLong(status.get("msgGetTotalTodayNow")) > 0, "msgGetTotalTodayNow" + run.describe());
            // StoreStatsService's put figures, as Java's brokerStatus prints them
            assertTrue(status.get("putMessageDistributeTime").matches("(\\[[^\\]]+\\]:\\d+ ?){13}"), "putMessageDistributeTime" + run.describe());
            assertTrue(Long.parseLong(status.get("putMessageTimesTotal")) >= 2L * MESSAGES, "putMessageTimesTotal" + run.describe());
            assertTrue(Long.parseLong(status.get("putMessageSizeTotal")) > 0, "putMessageSizeTotal" + run.describe());
            assertTrue(status.get("putLatency99").matches("\\d+\\.\\d\\d"), "putLatency99" + run.describe());
            assertEquals(Integer.toString(Integer.MAX_VALUE), status.get("remainTransientStoreBufferNumbs"), run.describe());
            assertTrue(Long.parseLong(status.get("sendThreadPoolQueueHeadWaitTimeMills")) >= 0, run.describe());
        });
    }

    /**
     * queryMsgByKey finds the message with key K-3 where its send result put it; queryMsgByUniqueKey shows
     * it with its commit-log offset; queryMsgById finds it again by the offset message id built from the
     * store host and that offset (the 4.9.7 tool reads only offset ids, the 5.3.3 tool needs -t).
     */
    @Test
    @Order(12)
    void queryMsgByKeyByUniqueKeyAndByIdFindTheSentMessage() {
        eachTools.concurrently("queryMsgByKey / queryMsgByUniqueKey / queryMsgById", mqadmin -> {
            String topic = topic(mqadmin);
            String[] sent = sent(mqadmin).stream().filter(w -> w[0].equals("K-3")).findFirst()
                .orElseThrow(() -> new AssertionError("no SENT K-3 line\n" + produced.get(mqadmin.version()).report()));
            MqAdminRun byKey = mqadmin.run("queryMsgByKey", "-t", topic, "-k", "K-3");
            assertSucceeded(byKey);
            assertTrue(byKey.stdoutLines().get(0).matches("#Message ID\\s+#QID\\s+#Offset"), "header" + byKey.describe());
            assertEquals(2, byKey.stdoutLines().size(), "one message" + byKey.describe());
            String[] row = byKey.stdoutLines().get(1).trim().split("\\s+");
            assertEquals(List.of(sent[1], sent[2]), List.of(row[1], row[2]), "queue and offset of the send result"
                + byKey.describe());
            String uniqueKey = row[0];

            MqAdminRun byUniqueKey = mqadmin.run("queryMsgByUniqueKey", "-t", topic, "-i", uniqueKey);
            assertSucceeded(byUniqueKey);
            Map<String, String> shown = messageFields(byUniqueKey);
            assertMessage(shown, topic, sent, byUniqueKey);
            assertTrue(shown.get("Properties").contains("UNIQ_KEY=" + uniqueKey), byUniqueKey.describe());
            assertTrue(byUniqueKey.stdout().contains("MessageTrack [consumerGroup=" + group(mqadmin)
                + ", trackType=NOT_ONLINE, exceptionDesc=CODE:206 DESC:the consumer group[" + group(mqadmin)
                + "] not online]"), "the track of the group that consumed it" + byUniqueKey.describe());
            long commitLogOffset = Long.parseLong(shown.get("CommitLog Offset"));
            MessageExt stored = brokerApi.viewMessage(broker.address(), commitLogOffset, RPC_TIMEOUT_MILLIS);
            assertEquals("K-3", stored.getKeys(), "VIEW_MESSAGE_BY_ID at commit-log offset " + commitLogOffset);

            String offsetId = offsetMessageId(broker.address(), commitLogOffset);
            MqAdminRun byId = isFive(mqadmin)
                ? mqadmin.run("queryMsgById", "-t", topic, "-i", offsetId)
                : mqadmin.run("queryMsgById", "-i", offsetId);
            assertSucceeded(byId);
            Map<String, String> viewed = messageFields(byId);
            assertMessage(viewed, topic, sent, byId);
            assertEquals(Long.toString(commitLogOffset), viewed.get("CommitLog Offset"), byId.describe());
            if (isFive(mqadmin)) {
                assertEquals(offsetId, viewed.get("OffsetID"), byId.describe());
            }
        });
    }

    @Test
    @Order(13)
    void deleteSubGroupWithRemoveOffsetDropsTheGroupAndItsOffsets() {
        eachTools.concurrently("deleteSubGroup -b -r true", mqadmin -> {
            String group = group(mqadmin);
            String topic = topic(mqadmin);
            MqAdminRun run = mqadmin.run("deleteSubGroup", "-b", broker.address(), "-g", group, "-r", "true");
            assertSucceeded(run);
            assertEquals(List.of("delete subscription group [" + group + "] from broker [" + broker.address() + "] success."),
                run.stdoutLines(), run.describe());
            Await.until("group " + group + " gone from subscriptionGroup.json", ROUTE_TIMEOUT,
                () -> !groupsInFile().containsKey(group), this::diagnostics);
            Map<Integer, Long> left = committed(group, topic);
            assertTrue(left.values().stream().allMatch(o -> o <= 0), "committed offsets after removeOffset: " + left);
            Await.until(topic + "@" + group + " gone from consumerOffset.json", OFFSET_TIMEOUT,
                () -> !offsetsInFile().containsKey(topic + "@" + group), this::diagnostics);
        });
    }

    @Test
    @Order(14)
    void deleteTopicOnTheClusterRemovesTheRouteAndTheTopic() {
        eachTools.concurrently("deleteTopic -c", mqadmin -> {
            String topic = topic(mqadmin);
            MqAdminRun run = mqadmin.run("deleteTopic", "-c", CLUSTER, "-t", topic);
            assertSucceeded(run);
            assertEquals(List.of("delete topic [" + topic + "] from cluster [" + CLUSTER + "] success.",
                "delete topic [" + topic + "] from NameServer success."), run.stdoutLines(), run.describe());
            Exception gone = assertThrows(Exception.class, () -> probe.route(topic), "route of " + topic + " after deleteTopic");
            assertEquals(17, NamesrvProbe.responseCode(gone), "TOPIC_NOT_EXIST expected, got " + gone);
            Await.until(topic + " gone from topics.json", ROUTE_TIMEOUT, () -> !topicsInFile().containsKey(topic),
                this::diagnostics);
        });
    }

    // ------------------------------------------------------------------------------------------------

    private Path brokerDir() {
        return dir.resolve("broker");
    }

    private String diagnostics() {
        return broker.describe(40) + "\n" + namesrv.describe(20);
    }

    private static boolean isFive(MqAdmin mqadmin) {
        return !mqadmin.version().startsWith("4.");
    }

    private static String serializeType(MqAdmin mqadmin) {
        return isFive(mqadmin) ? "ROCKETMQ" : "JSON";
    }

    private static String tag(MqAdmin mqadmin) {
        return mqadmin.version().replace('.', '_');
    }

    private static String topic(MqAdmin mqadmin) {
        return "AdminRustTopic_" + tag(mqadmin);
    }

    private static String clusterTopic(MqAdmin mqadmin) {
        return "AdminRustClusterTopic_" + tag(mqadmin);
    }

    private static String group(MqAdmin mqadmin) {
        return "admin_rust_group_" + tag(mqadmin);
    }

    private List<String[]> sent(MqAdmin mqadmin) {
        DriverRun producer = produced.get(mqadmin.version());
        if (producer == null) {
            throw new AssertionError("the topicStatus test did not produce for mqadmin " + mqadmin.version());
        }
        return producer.lines("SENT ");
    }

    /** What {@code mqbroker -c broker.conf -p} prints, with the environment our broker runs in. */
    private Map<String, String> printedConfig() {
        Path binary = CompatDirs.binDir().resolve("mqbroker");
        ChildProcess child = RocketmqHome.create(brokerDir()).applyTo(ChildProcess.builder("mqbroker -p"))
            .command(List.of(binary.toString(), "-c", brokerDir().resolve("broker.conf").toString(), "-p"))
            .output(dir.resolve("mqbroker-p.out"), dir.resolve("mqbroker-p.err"))
            .start();
        assertEquals(0, child.awaitExit(Duration.ofSeconds(30)), child.describe(40));
        Map<String, String> config = new LinkedHashMap<>();
        for (String line : child.stdout().split("\n")) {
            int eq = line.indexOf('=');
            if (eq > 0 && line.substring(0, eq).matches("[A-Za-z0-9_]+")) {
                config.put(line.substring(0, eq), line.substring(eq + 1).strip());
            }
        }
        assertTrue(config.size() > 100, "mqbroker -p printed " + config.size() + " keys\n" + child.describe(40));
        return config;
    }

    private static Map<String, String> parseLines(MqAdminRun run, Pattern pattern) {
        Map<String, String> values = new LinkedHashMap<>();
        for (String line : run.stdoutLines()) {
            Matcher m = pattern.matcher(line);
            if (m.matches()) {
                values.put(m.group(1), m.group(2) == null ? "" : m.group(2));
            }
        }
        assertFalse(values.isEmpty(), "no key/value lines" + run.describe());
        return values;
    }

    /**
     * The "Name:   value" lines of a message printed by queryMsgByUniqueKey / queryMsgById. The tool also
     * wrote the body to a file under /tmp/rocketmq/msgbodys (a fixed path of its own): that file is removed.
     */
    private static Map<String, String> messageFields(MqAdminRun run) throws Exception {
        Map<String, String> fields = new LinkedHashMap<>();
        for (String line : run.stdoutLines()) {
            Matcher m = Pattern.compile("^([A-Za-z][A-Za-z ]*):\\s+(.*)$").matcher(line);
            if (m.matches()) {
                fields.putIfAbsent(m.group(1), m.group(2));
            }
        }
        String bodyFile = fields.get("Message Body Path");
        if (bodyFile != null && bodyFile.startsWith("/tmp/rocketmq/msgbodys/")) {
            Files.deleteIfExists(Path.of(bodyFile));
        }
        return fields;
    }

    private void assertMessage(Map<String, String> shown, String topic, String[] sent, MqAdminRun run) {
        assertEquals(topic, shown.get("Topic"), run.describe());
        assertEquals("[TagR]", shown.get("Tags"), run.describe());
        assertEquals("[K-3]", shown.get("Keys"), run.describe());
        assertEquals(sent[1], shown.get("Queue ID"), run.describe());
        assertEquals(sent[2], shown.get("Queue Offset"), run.describe());
        assertEquals(broker.address(), shown.get("Store Host"), run.describe());
        assertEquals("0", shown.get("Reconsume Times"), run.describe());
        assertTrue(shown.get("Properties").contains("CLUSTER=" + CLUSTER), run.describe());
    }

    /** Java's offset message id: store host IPv4 and port, then the commit-log offset, in upper-case hex. */
    private static String offsetMessageId(String address, long commitLogOffset) {
        String[] hostPort = address.split(":");
        StringBuilder id = new StringBuilder();
        for (String part : hostPort[0].split("\\.")) {
            id.append(String.format("%02X", Integer.parseInt(part)));
        }
        return id.append(String.format("%08X", Integer.parseInt(hostPort[1])))
            .append(String.format("%016X", commitLogOffset)).toString();
    }

    private void awaitRoute(String topic, int read, int write) {
        Await.until("route of " + topic + " with " + read + " read / " + write + " write queues", ROUTE_TIMEOUT,
            () -> probe.route(topic), (TopicRouteData route) -> {
                QueueData q = route.getQueueDatas().stream().filter(d -> d.getBrokerName().equals(BROKER)).findFirst()
                    .orElse(null);
                return q != null && q.getReadQueueNums() == read && q.getWriteQueueNums() == write && q.getPerm() == 6
                    && route.getBrokerDatas().stream().anyMatch(b -> broker.address().equals(b.getBrokerAddrs().get(0L)));
            }, this::diagnostics);
    }

    private void assertTopicInFile(String topic, int read, int write) throws Exception {
        JSONObject config = Await.until(topic + " in topics.json", ROUTE_TIMEOUT, () -> topicsInFile().getJSONObject(topic),
            t -> t != null, this::diagnostics);
        assertEquals(topic, config.getString("topicName"), config.toJSONString());
        assertEquals(read, config.getIntValue("readQueueNums"), config.toJSONString());
        assertEquals(write, config.getIntValue("writeQueueNums"), config.toJSONString());
        assertEquals(6, config.getIntValue("perm"), config.toJSONString());
        assertEquals("SINGLE_TAG", config.getString("topicFilterType"), config.toJSONString());
        assertFalse(config.getBooleanValue("order"), config.toJSONString());
    }

    private JSONObject configFile(String name, String table) throws Exception {
        Path file = broker.storeDir().resolve("config").resolve(name);
        if (!Files.exists(file)) {
            return new JSONObject();
        }
        JSONObject all = JSON.parseObject(Files.readString(file));
        JSONObject entries = all == null ? null : all.getJSONObject(table);
        return entries == null ? new JSONObject() : entries;
    }

    private JSONObject topicsInFile() throws Exception {
        return configFile("topics.json", "topicConfigTable");
    }

    private JSONObject groupsInFile() throws Exception {
        return configFile("subscriptionGroup.json", "subscriptionGroupTable");
    }

    private JSONObject offsetsInFile() throws Exception {
        return configFile("consumerOffset.json", "offsetTable");
    }

    /** QUERY_CONSUMER_OFFSET of the read queues (-1: none). */
    private Map<Integer, Long> committed(String group, String topic) throws Exception {
        Map<Integer, Long> offsets = new TreeMap<>();
        for (int q = 0; q < READ_QUEUES; q++) {
            offsets.put(q, brokerProbe.committedOffset(group, topic, q));
        }
        return offsets;
    }

    /** The lines whose first column is {@code first}, split at whitespace. */
    private static List<String[]> rows(MqAdminRun run, String first) {
        return run.stdoutLines().stream().map(l -> l.trim().split("\\s+")).filter(c -> c[0].equals(first)).toList();
    }

    /** JSON without whitespace (mqadmin pretty-prints it with tabs and newlines). */
    private static String compact(String json) {
        return json.replaceAll("\\s+", "");
    }

    private static void assertSucceeded(MqAdminRun run) {
        assertTrue(run.succeeded(), "mqadmin failed" + run.describe());
    }
}
