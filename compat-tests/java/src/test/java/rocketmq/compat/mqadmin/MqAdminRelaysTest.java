package rocketmq.compat.mqadmin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;
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
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.runtime.Versions;

/**
 * The mqadmin commands our broker answers by asking the group's live clients (Java's Broker2Client and
 * callConsumer relays) and the smaller maintenance codes, with mqadmin 4.9.7 (JSON headers) and 5.3.3 (ROCKETMQ
 * headers) against our name server and broker, and a live Java 4.9.7 push consumer and producer in this JVM:
 * resetOffsetByTime (online: the consumer reads the topic again; offline: mqadmin's fallback commits the offsets),
 * skipAccumulatedMessage, consumerStatus, queryMsgById -g -d (CONSUME_MESSAGE_DIRECTLY with the body the broker
 * reads from its store), the admin API's getConsumeStatus, cleanExpiredCQ, cleanUnusedTopic,
 * deleteExpiredCommitLog, queryCq, producer and exportMetadata. The expected lines are what the same tools print
 * against a Java broker (from the tools' sources and by hand against Java 5.3.3).
 */
@DisplayName("mqadmin relays and maintenance codes against our broker")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@ExtendWith(DumpLogsOnFailure.class)
class MqAdminRelaysTest {
    private static final String CLUSTER = "RelaysCluster";
    private static final String BROKER = "relays-broker";
    private static final String TOPIC = "RelaysTopic";
    private static final String LIVE_GROUP = "RelaysLiveGroup";
    private static final String OFFLINE_GROUP = "RelaysOfflineGroup";
    private static final String NEVER_GROUP = "RelaysNeverGroup";
    private static final String PRODUCER_GROUP = "RelaysProducerGroup";
    private static final int QUEUES = 4;
    private static final int MESSAGES = 20;
    private static final Duration CONSUME_TIMEOUT = Duration.ofSeconds(60);
    private static final Duration OFFSET_TIMEOUT = Duration.ofSeconds(30);

    static {
        // The consumer re-adds the queues a reset dropped at its next rebalance: every second, not every 20 s.
        System.setProperty("rocketmq.client.rebalance.waitInterval", "1000");
    }

    @TempDir
    static Path dir;
    private NameServer namesrv;
    private RustBroker broker;
    private BrokerProbe probe;
    private DefaultMQAdminExt admin;
    private DefaultMQProducer producer;
    private DefaultMQPushConsumer consumer;
    private EachTools eachTools;
    private long beforeFirstSend;
    private final List<SendResult> sent = Collections.synchronizedList(new ArrayList<>());
    /** Every delivery the live consumer's listener saw (re-consumption counts again). */
    private final AtomicInteger deliveries = new AtomicInteger();
    /** Bodies of the messages delivered, by offset message id (a directly consumed message is a plain MessageExt). */
    private final Map<String, String> bodies = new ConcurrentHashMap<>();

    @BeforeAll
    void startBrokerClientsAndTopic() throws Exception {
        namesrv = NameServer.start(dir.resolve("namesrv"));
        // 4.9's reset (the broker asks the live clients; an offline group is CONSUMER_NOT_ONLINE), as Java 4.9.7
        // and Java 5.3.3 with useServerSideResetOffset=false; the last test turns 5.x's default back on.
        broker = RustBroker.start(dir.resolve("broker"), namesrv.address(), CLUSTER, BROKER,
            Map.of("useServerSideResetOffset", "false"));
        probe = BrokerProbe.connect(broker.address(), BROKER);
        admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv.address());
        admin.setInstanceName("relays-admin");
        admin.start();
        admin.createAndUpdateTopicConfig(broker.address(), new TopicConfig(TOPIC, QUEUES, QUEUES, 6));
        Await.until("route of " + TOPIC, Duration.ofSeconds(30), () -> {
            try {
                return admin.examineTopicRouteInfo(TOPIC).getQueueDatas().get(0).getWriteQueueNums() == QUEUES;
            } catch (Exception e) {
                return false;
            }
        }, this::diagnostics);

        producer = new DefaultMQProducer(PRODUCER_GROUP);
        producer.setNamesrvAddr(namesrv.address());
        producer.setInstanceName("relays-producer");
        producer.start();
        beforeFirstSend = System.currentTimeMillis() - 1000;
        send(MESSAGES);

        // The offline group reads everything once and goes away, leaving its committed offsets.
        DefaultMQPushConsumer once = consumer(OFFLINE_GROUP, "relays-offline", new AtomicInteger(), null);
        Await.until(OFFLINE_GROUP + " committed every queue", OFFSET_TIMEOUT, () -> committedAll(OFFLINE_GROUP),
            this::diagnostics);
        once.shutdown();

        consumer = consumer(LIVE_GROUP, "relays-live", deliveries, bodies);
        Await.until(LIVE_GROUP + " consumed " + MESSAGES, CONSUME_TIMEOUT, () -> deliveries.get() >= MESSAGES,
            this::diagnostics);
        Await.until(LIVE_GROUP + " committed every queue", OFFSET_TIMEOUT, () -> committedAll(LIVE_GROUP),
            this::diagnostics);
        eachTools = new EachTools(List.of(
            new MqAdmin(Versions.JAVA_49, "JSON", namesrv.address(), dir.resolve("mqadmin-49")),
            new MqAdmin(Versions.JAVA_5, "ROCKETMQ", namesrv.address(), dir.resolve("mqadmin-5"))));
    }

    @AfterAll
    void stopEverything() {
        for (Runnable stop : new Runnable[] {
            () -> consumer.shutdown(), () -> producer.shutdown(), () -> admin.shutdown(), probe::close,
            broker::close, namesrv::close}) {
            try {
                stop.run();
            } catch (Exception e) {
                System.out.println("closing: " + e);
            }
        }
    }

    // ------------------------------------------------------------------------------------------------

    /**
     * INVOKE_BROKER_TO_RESET_OFFSET with the group online: the broker finds each queue's offset for the time,
     * sends RESET_CONSUMER_CLIENT_OFFSET to the consumer and answers the table mqadmin prints; the consumer then
     * reads every message again and commits back to the end.
     */
    @Test
    @Order(1)
    void resetOffsetByTimeOnlineMakesTheLiveConsumerReadTheTopicAgain() {
        eachTools.inTurn("resetOffsetByTime (online)", mqadmin -> {
            int before = deliveries.get();
            MqAdminRun run = mqadmin.run("resetOffsetByTime", "-g", LIVE_GROUP, "-t", TOPIC, "-s",
                Long.toString(beforeFirstSend));
            assertSucceeded(run);
            String intro = isFive(mqadmin)
                ? "start reset consumer offset by specified, group[" + LIVE_GROUP + "], topic[" + TOPIC + "], force[true]"
                : "rollback consumer offset by specified group[" + LIVE_GROUP + "], topic[" + TOPIC + "], force[true]";
            assertTrue(run.stdoutLines().get(0).startsWith(intro), run.describe());
            assertEquals(List.of("#brokerName", "#queueId", "#offset"), List.of(run.stdoutLines().get(1).trim().split("\\s+")),
                run.describe());
            Map<Integer, Long> table = new TreeMap<>();
            for (String[] row : rows(run, BROKER)) {
                table.put(Integer.parseInt(row[1]), Long.parseLong(row[2]));
            }
            assertEquals(Map.of(0, 0L, 1, 0L, 2, 0L, 3, 0L), table, "every queue back to its first message" + run.describe());
            Await.until(LIVE_GROUP + " read the topic again", CONSUME_TIMEOUT,
                () -> deliveries.get() >= before + total(), this::diagnostics);
            Await.until(LIVE_GROUP + " committed every queue again", OFFSET_TIMEOUT, () -> committedAll(LIVE_GROUP),
                this::diagnostics);
        });
    }

    /** skipAccumulatedMessage of the live group (timestamp -1): the table holds every queue's max offset. */
    @Test
    @Order(2)
    void skipAccumulatedMessageOnlineAnswersTheMaxOffsets() {
        eachTools.inTurn("skipAccumulatedMessage (online)", mqadmin -> {
            MqAdminRun run = mqadmin.run("skipAccumulatedMessage", "-g", LIVE_GROUP, "-t", TOPIC);
            assertSucceeded(run);
            assertEquals(List.of("#brokerName", "#queueId", "#offset"), List.of(run.stdoutLines().get(0).trim().split("\\s+")),
                run.describe());
            Map<Integer, Long> table = new TreeMap<>();
            for (String[] row : rows(run, BROKER)) {
                table.put(Integer.parseInt(row[1]), Long.parseLong(row[2]));
            }
            assertEquals(maxOffsets(), table, run.describe());
        });
    }

    /**
     * With the group offline our broker answers CONSUMER_NOT_ONLINE as Java's does, and both tools fall back to
     * committing the offsets themselves: skipAccumulatedMessage moves them to the end, resetOffsetByTime back to the
     * first message.
     */
    @Test
    @Order(3)
    void offlineGroupsAreResetThroughMqadminsFallback() {
        eachTools.inTurn("skipAccumulatedMessage / resetOffsetByTime (offline)", mqadmin -> {
            send(5);
            assertFalse(committed(OFFLINE_GROUP).equals(maxOffsets()), "the offline group is behind");
            MqAdminRun skip = mqadmin.run("skipAccumulatedMessage", "-g", OFFLINE_GROUP, "-t", TOPIC);
            assertSucceeded(skip);
            assertEquals(List.of("#brokerName", "#queueId", "#brokerOffset", "#consumerOffset", "#timestampOffset",
                "#rollbackOffset"), List.of(skip.stdoutLines().get(0).trim().split("\\s+")), skip.describe());
            Map<Integer, Long> max = maxOffsets();
            Await.until(OFFLINE_GROUP + " at the end", OFFSET_TIMEOUT, () -> committed(OFFLINE_GROUP).equals(max),
                this::diagnostics);

            MqAdminRun reset = mqadmin.run("resetOffsetByTime", "-g", OFFLINE_GROUP, "-t", TOPIC, "-s",
                Long.toString(beforeFirstSend));
            assertSucceeded(reset);
            // the tools' fallback (ResetOffsetByTimeOldCommand) prints its own intro and the rollback table
            assertTrue(reset.stdout().contains("roup[" + OFFLINE_GROUP + "], topic[" + TOPIC + "], force[true]"), reset.describe());
            assertTrue(reset.stdout().contains("#timestampOffset"), reset.describe());
            Await.until(OFFLINE_GROUP + " back at the start", OFFSET_TIMEOUT,
                () -> committed(OFFLINE_GROUP).values().stream().allMatch(o -> o == 0), this::diagnostics);
        });
    }

    /** consumerStatus lists the live client from its running info (GET_CONSUMER_RUNNING_INFO relayed to it). */
    @Test
    @Order(4)
    void consumerStatusShowsTheLiveClientsRunningInfo() {
        String clientId = clientId();
        eachTools.concurrently("consumerStatus", mqadmin -> {
            MqAdminRun all = mqadmin.run("consumerStatus", "-g", LIVE_GROUP);
            assertSucceeded(all);
            assertEquals(List.of("#Index", "#ClientId", "#Version", "#ConsumerRunningInfoFile"),
                List.of(all.stdoutLines().get(0).trim().split("\\s+")), all.describe());
            String[] row = all.stdoutLines().get(1).trim().split("\\s+");
            assertEquals(List.of("1", clientId, "V4_9_7"), List.of(row[0], row[1], row[2]), all.describe());
            assertTrue(all.stdout().contains("Same subscription in the same group of consumer"), all.describe());
            assertTrue(all.stdout().contains("Rebalance OK"), all.describe());

            MqAdminRun one = mqadmin.run("consumerStatus", "-g", LIVE_GROUP, "-i", clientId);
            // the running info's own table header says "#ConsumeFailed TPS": only stderr tells a failure
            assertEquals("", one.stderr(), one.describe());
            for (String part : List.of("#Consumer Properties#", "#Consumer Subscription#", "#Consumer Offset#", TOPIC)) {
                assertTrue(one.stdout().contains(part), part + one.describe());
            }

            MqAdminRun gone = mqadmin.run("consumerStatus", "-g", LIVE_GROUP, "-i", "127.0.0.1@nobody");
            assertTrue(gone.stderr().contains("CODE: 1  DESC: The Consumer <" + LIVE_GROUP + "> <127.0.0.1@nobody> not online"),
                "Java's callConsumer remark" + gone.describe());
        });
    }

    /**
     * queryMsgById -g -d: CONSUME_MESSAGE_DIRECTLY goes through the broker, which fills in the stored message, to
     * the live consumer, whose listener consumes it again.
     */
    @Test
    @Order(5)
    void queryMsgByIdConsumesTheMessageDirectlyOnTheLiveClient() {
        String clientId = clientId();
        SendResult first = sent.get(0);
        eachTools.inTurn("queryMsgById -g -d", mqadmin -> {
            int before = deliveries.get();
            bodies.clear();
            MqAdminRun run = isFive(mqadmin)
                ? mqadmin.run("queryMsgById", "-t", TOPIC, "-i", first.getOffsetMsgId(), "-g", LIVE_GROUP, "-d", clientId)
                : mqadmin.run("queryMsgById", "-i", first.getOffsetMsgId(), "-g", LIVE_GROUP, "-d", clientId);
            assertSucceeded(run);
            assertTrue(run.stdout().contains("ConsumeMessageDirectlyResult [order=false, autoCommit=true, consumeResult=CR_SUCCESS"),
                run.describe());
            assertTrue(deliveries.get() > before, "the listener saw the message");
            assertEquals("body-0", bodies.get(first.getOffsetMsgId()), "the body the broker read from its store");
        });
    }

    /** The admin API's getConsumeStatus (INVOKE_BROKER_TO_GET_CONSUMER_STATUS): the client's offsets by queue. */
    @Test
    @Order(6)
    void getConsumeStatusAnswersTheClientsOffsets() throws Exception {
        Map<String, Map<MessageQueue, Long>> status = admin.getConsumeStatus(TOPIC, LIVE_GROUP, "");
        assertEquals(Set.of(clientId()), status.keySet(), status.toString());
        Map<MessageQueue, Long> offsets = status.get(clientId());
        assertEquals(QUEUES, offsets.size(), offsets.toString());
        for (MessageQueue mq : offsets.keySet()) {
            assertEquals(BROKER, mq.getBrokerName(), offsets.toString());
            assertEquals(TOPIC, mq.getTopic(), offsets.toString());
        }
    }

    /** cleanExpiredCQ, cleanUnusedTopic and deleteExpiredCommitLog succeed and leave live data alone. */
    @Test
    @Order(7)
    void maintenanceCommandsSucceedAndKeepLiveQueues() throws Exception {
        Map<Integer, Long> before = maxOffsets();
        eachTools.concurrently("cleanExpiredCQ / cleanUnusedTopic / deleteExpiredCommitLog", mqadmin -> {
            for (String command : List.of("cleanExpiredCQ", "cleanUnusedTopic", "deleteExpiredCommitLog")) {
                MqAdminRun run = mqadmin.run(command, "-b", broker.address());
                assertSucceeded(run);
                assertEquals(List.of("success"), run.stdoutLines(), run.describe());
            }
            assertEquals(before, maxOffsets(), "the topic's queues");
        });
    }

    /** queryCq lists the units of queue 0 as Java's QueryConsumeQueueResponseBody, with the group's subscription. */
    @Test
    @Order(8)
    void queryCqListsTheConsumeQueueUnits() throws Exception {
        long max = probe.maxOffset(TOPIC, 0);
        eachTools.concurrently("queryCq", mqadmin -> {
            MqAdminRun run = mqadmin.run("queryCq", "-t", TOPIC, "-q", "0", "-i", "0", "-c", "2", "-b", broker.address(),
                "-g", LIVE_GROUP);
            assertSucceeded(run);
            String out = run.stdout();
            assertTrue(out.contains("Subscription data: \n{"), run.describe());
            assertTrue(out.contains("\"topic\":\"" + TOPIC + "\""), run.describe());
            assertTrue(out.contains("Filter data: \nnull\n"), run.describe());
            assertTrue(out.contains("Queue data: \nmax: " + max + ", min: 0\n"), run.describe());
            assertTrue(out.contains("idx: 0\nConsumeQueueData{physicOffset="), run.describe());
            assertTrue(out.contains("idx: 1\nConsumeQueueData{physicOffset="), run.describe());
            assertFalse(out.contains("idx: 2\n"), "-c 2" + run.describe());
            assertTrue(out.contains(", extendDataJson='null', bitMap='null', eval=false, msg='null'}"), run.describe());
        });
    }

    /** producer -b (GET_ALL_PRODUCER_INFO): the live producer of its group. */
    @Test
    @Order(9)
    void producerListsTheLiveProducer() {
        eachTools.concurrently("producer", mqadmin -> {
            MqAdminRun run = mqadmin.run("producer", "-b", broker.address());
            assertSucceeded(run);
            String line = run.stdoutLines().stream().filter(l -> l.startsWith("producer group (" + PRODUCER_GROUP + ")"))
                .findFirst().orElseThrow(() -> new AssertionError("no line of " + PRODUCER_GROUP + run.describe()));
            assertTrue(line.contains("instance : ") && line.contains(producer.buildMQClientId()), run.describe());
            assertTrue(line.contains("clientId=" + producer.buildMQClientId() + ",remoteIP=/127.0.0.1:"), run.describe());
            assertTrue(line.contains(", language=JAVA, version="), run.describe());
        });
    }

    /** exportMetadata -b -t / -g (GET_SYSTEM_TOPIC_LIST_FROM_BROKER leaves the system topics out). */
    @Test
    @Order(10)
    void exportMetadataWritesTheUserTopicsAndGroups() {
        eachTools.concurrently("exportMetadata", mqadmin -> {
            Path out = dir.resolve("export-" + mqadmin.version());
            Files.createDirectories(out);
            MqAdminRun topics = mqadmin.run("exportMetadata", "-b", broker.address(), "-t", "-f", out.toString());
            assertSucceeded(topics);
            assertTrue(topics.stdout().contains("export " + out.resolve("topic.json") + " success"), topics.describe());
            String topicJson = Files.readString(out.resolve("topic.json"));
            assertTrue(topicJson.contains("\"" + TOPIC + "\""), topicJson);
            for (String system : List.of("TBW102", "SCHEDULE_TOPIC_XXXX", "\"" + CLUSTER + "\"", "\"" + BROKER + "\"",
                "%RETRY%")) {
                assertFalse(topicJson.contains(system), system + " left out: " + topicJson);
            }
            MqAdminRun groups = mqadmin.run("exportMetadata", "-b", broker.address(), "-g", "-f", out.toString());
            assertSucceeded(groups);
            String groupJson = Files.readString(out.resolve("subscriptionGroup.json"));
            assertTrue(groupJson.contains("\"" + LIVE_GROUP + "\""), groupJson);
        });
    }

    /** 5.3.3's updateTopicList and updateSubGroupList (UPDATE_AND_CREATE_TOPIC_LIST / _SUBSCRIPTIONGROUP_LIST). */
    @Test
    @Order(11)
    void updateTopicListAndUpdateSubGroupListCreateEveryEntry() {
        eachTools.concurrently("updateTopicList / updateSubGroupList", mqadmin -> {
            if (!isFive(mqadmin)) {
                return; // 4.9.7 has neither command
            }
            Path topics = dir.resolve("topics.json");
            Files.writeString(topics, "[{\"topicName\":\"RelaysListA\",\"readQueueNums\":2,\"writeQueueNums\":2,\"perm\":6},"
                + "{\"topicName\":\"RelaysListB\",\"readQueueNums\":1,\"writeQueueNums\":1,\"perm\":6}]");
            MqAdminRun run = mqadmin.run("updateTopicList", "-b", broker.address(), "-f", topics.toString());
            assertSucceeded(run);
            assertEquals(List.of("submit batch of topic config to " + broker.address() + " success, please check the result later."),
                run.stdoutLines(), run.describe());
            assertTrue(probe.hasTopic("RelaysListA") && probe.hasTopic("RelaysListB"), "both topics created");

            Path system = dir.resolve("system-topics.json");
            Files.writeString(system, "[{\"topicName\":\"TBW102\",\"readQueueNums\":2,\"writeQueueNums\":2,\"perm\":6}]");
            MqAdminRun refused = mqadmin.run("updateTopicList", "-b", broker.address(), "-f", system.toString());
            assertTrue(refused.stderr().contains("CODE: 29  DESC: The topic[TBW102] is conflict with system topic."),
                refused.describe());

            Path groups = dir.resolve("groups.json");
            Files.writeString(groups, "[{\"groupName\":\"RelaysListGroup\",\"retryQueueNums\":1}]");
            MqAdminRun created = mqadmin.run("updateSubGroupList", "-b", broker.address(), "-f", groups.toString());
            assertSucceeded(created);
            assertEquals(List.of("submit batch of group config to " + broker.address() + " success, please check the result later."),
                created.stdoutLines(), created.describe());
            assertEquals(16, probe.groupRetryMaxTimes("RelaysListGroup"), "the group exists with Java's default retries");
        });
    }

    /**
     * 5.x's server-side reset (useServerSideResetOffset=true, Java 5.3.3's default, read per use so set live):
     * 5.3.3's resetOffsetByTime -b -q -o resets one queue (INVOKE_BROKER_TO_RESET_OFFSET with queueId and offset):
     * that queue moves, the others stay where they were (the whole-topic reset would have moved them all); and
     * skipAccumulatedMessage of a group that exists but never committed moves it to the queues' ends (4.9's path
     * answers "THe consumer group <...> not exist").
     */
    @Test
    @Order(12)
    void resetOffsetOfOneQueueMovesThatQueueOnly() throws Exception {
        java.util.Properties on = new java.util.Properties();
        on.setProperty("useServerSideResetOffset", "true");
        admin.updateBrokerConfig(broker.address(), on);
        admin.createAndUpdateSubscriptionGroupConfig(broker.address(),
            new org.apache.rocketmq.common.subscription.SubscriptionGroupConfig() {{
                setGroupName(NEVER_GROUP);
            }});
        eachTools.inTurn("skipAccumulatedMessage (never committed)", mqadmin -> {
            MqAdminRun skip = mqadmin.run("skipAccumulatedMessage", "-g", NEVER_GROUP, "-t", TOPIC);
            assertSucceeded(skip);
            Map<Integer, Long> max = maxOffsets();
            Await.until(NEVER_GROUP + " at the end", OFFSET_TIMEOUT, () -> committed(NEVER_GROUP).equals(max),
                this::diagnostics);
        });
        eachTools.inTurn("resetOffsetByTime -b -q -o", mqadmin -> {
            if (!isFive(mqadmin)) {
                return; // 4.9.7 resets whole topics only
            }
            Map<Integer, Long> before = committed(OFFLINE_GROUP);
            MqAdminRun run = mqadmin.run("resetOffsetByTime", "-g", OFFLINE_GROUP, "-t", TOPIC, "-s", "now", "-b",
                broker.address(), "-q", "1", "-o", "2");
            assertSucceeded(run);
            assertTrue(run.stdout().contains("reset consumer offset to 2"), run.describe());
            Map<Integer, Long> expected = new TreeMap<>(before);
            expected.put(1, 2L);
            assertEquals(expected, committed(OFFLINE_GROUP), "only queue 1 moved" + run.describe());
        });
    }

    // ------------------------------------------------------------------------------------------------

    private DefaultMQPushConsumer consumer(String group, String instance, AtomicInteger count, Map<String, String> seen)
        throws Exception {
        DefaultMQPushConsumer c = new DefaultMQPushConsumer(group);
        c.setNamesrvAddr(namesrv.address());
        c.setInstanceName(instance);
        c.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        c.setPersistConsumerOffsetInterval(1000);
        c.subscribe(TOPIC, "*");
        c.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt m : msgs) {
                count.incrementAndGet();
                if (seen != null) {
                    seen.put(offsetIdOf(m), new String(m.getBody()));
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        c.start();
        return c;
    }

    private static String offsetIdOf(MessageExt m) {
        try {
            return (String) m.getClass().getMethod("getOffsetMsgId").invoke(m);
        } catch (ReflectiveOperationException e) {
            return m.getMsgId();
        }
    }

    private void send(int n) throws Exception {
        int base = sent.size();
        for (int i = 0; i < n; i++) {
            SendResult r = producer.send(new Message(TOPIC, "TagA", "K-" + (base + i), ("body-" + (base + i)).getBytes()));
            assertEquals(SendStatus.SEND_OK, r.getSendStatus(), r.toString());
            sent.add(r);
        }
    }

    private int total() {
        return sent.size();
    }

    private String clientId() {
        return consumer.buildMQClientId();
    }

    private Map<Integer, Long> maxOffsets() throws Exception {
        Map<Integer, Long> max = new TreeMap<>();
        for (int q = 0; q < QUEUES; q++) {
            max.put(q, probe.maxOffset(TOPIC, q));
        }
        return max;
    }

    private Map<Integer, Long> committed(String group) throws Exception {
        Map<Integer, Long> offsets = new TreeMap<>();
        for (int q = 0; q < QUEUES; q++) {
            offsets.put(q, probe.committedOffset(group, TOPIC, q));
        }
        return offsets;
    }

    private boolean committedAll(String group) throws Exception {
        return committed(group).equals(maxOffsets());
    }

    private static List<String[]> rows(MqAdminRun run, String first) {
        return run.stdoutLines().stream().map(l -> l.trim().split("\\s+")).filter(c -> c[0].equals(first)).toList();
    }

    private static boolean isFive(MqAdmin mqadmin) {
        return !mqadmin.version().startsWith("4.");
    }

    private String diagnostics() {
        return broker.describe(40) + "\n" + namesrv.describe(20);
    }

    private static void assertSucceeded(MqAdminRun run) {
        assertNotNull(run);
        assertTrue(run.succeeded(), "mqadmin failed" + run.describe());
    }
}
