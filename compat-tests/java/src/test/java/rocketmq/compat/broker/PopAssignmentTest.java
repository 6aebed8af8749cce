package rocketmq.compat.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.CompletableFuture;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.protocol.heartbeat.ConsumeType;
import org.apache.rocketmq.common.protocol.heartbeat.ConsumerData;
import org.apache.rocketmq.common.protocol.heartbeat.HeartbeatData;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.common.protocol.heartbeat.SubscriptionData;
import org.apache.rocketmq.common.protocol.route.QueueData;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import rocketmq.compat.client.DriverRun;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.mqadmin.MqAdmin;
import rocketmq.compat.mqadmin.MqAdminRun;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * 5.x server-side load balancing and the metadata reads pop consumers use, against our broker and, side by side, a
 * Java 5.3.3 broker behind the same name server (~45 s): mqadmin 5.3.3 {@code updateTopic -a +message.type=FIFO} and
 * {@code setConsumeMode -m POP -q 8} print the same on both; then the same raw requests to both must get the same
 * code, remark and body: GET_TOPIC_CONFIG (351, the attribute stored), GET_SUBSCRIPTIONGROUP_CONFIG (352),
 * GET_ALL_MESSAGE_REQUEST_MODE (402), SET_MESSAGE_REQUEST_MODE's refusals (401), the attribute rules of
 * UPDATE_AND_CREATE_TOPIC (17), and QUERY_ASSIGNMENT (400) for two consumers of the group (heartbeats from two
 * connections) in POP and PULL mode, BROADCASTING, an unknown strategy and an unknown group. The topic lives on both
 * brokers, so the route (and every assignment) spans both. Java answers the assignments as a HashSet whose order
 * changes from run to run: those are compared as sets.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class PopAssignmentTest {
    private static final String TOPIC = "PopT";
    private static final String GROUP = "PopG";

    @TempDir
    static Path dir;
    private NameServer namesrv;
    private RustBroker ours;
    private JavaBroker java;
    private NamesrvProbe probe;
    private MqAdmin mqadmin;
    private final List<MQClientAPIImpl> clients = new ArrayList<>();

    @BeforeAll
    void start() {
        namesrv = NameServer.start(dir.resolve("namesrv"));
        ours = RustBroker.start(dir.resolve("rust-broker"), namesrv.address(), "PopRust", "pop-rust");
        // With the timer (Java 5.3.3's default, and ours): a pop may be parked on both.
        java = JavaBroker.start(Versions.JAVA_5, dir.resolve("java-broker"), namesrv.address(), "PopJava", "pop-java",
            Map.of("timerWheelEnable", "true"));
        probe = NamesrvProbe.connect(namesrv.address());
        Await.until("both brokers registered", Duration.ofSeconds(30), probe::clusterInfo,
            info -> info.getBrokerAddrTable() != null && info.getBrokerAddrTable().containsKey("pop-rust")
                && info.getBrokerAddrTable().containsKey("pop-java"),
            () -> ours + " / " + java.describe(20));
        mqadmin = new MqAdmin(Versions.JAVA_5, "ROCKETMQ", namesrv.address(), dir.resolve("mqadmin-5"));
        for (int i = 0; i < 3; i++) {
            MQClientAPIImpl api = new MQClientAPIImpl(new NettyClientConfig(), null, null, new ClientConfig());
            api.start();
            clients.add(api);
        }
    }

    @AfterAll
    void stop() throws Exception {
        clients.forEach(MQClientAPIImpl::shutdown);
        for (AutoCloseable c : new AutoCloseable[] {probe, java, ours, namesrv}) {
            if (c != null) {
                c.close();
            }
        }
    }

    @Test
    void answersAreJavas() throws Exception {
        onBoth("updateTopic", "-b", "ADDR", "-t", TOPIC, "-r", "4", "-w", "4", "-a", "+message.type=FIFO");
        onBoth("setConsumeMode", "-b", "ADDR", "-t", TOPIC, "-g", GROUP, "-m", "POP", "-q", "8");
        Await.until("the topic routed to both brokers", Duration.ofSeconds(30), () -> probe.route(TOPIC),
            route -> route.getQueueDatas().stream().map(QueueData::getBrokerName).distinct().count() == 2, () -> "");
        // Two consumers of the group (and of a group left in PULL mode), each on its own connection to each broker.
        for (String addr : List.of(ours.address(), java.address())) {
            heartbeat(clients.get(0), addr, "client-1");
            heartbeat(clients.get(1), addr, "client-2");
        }
        String fifo = "{\"consumerGroup\":\"%s\",\"mode\":\"%s\",\"popShareQueueNum\":%d,\"topic\":\"%s\"}";
        List<String> requests = List.of(
            "351|topic=" + TOPIC, "351|topic=NoSuchTopic", "352|group=" + GROUP, "352|group=FreshGroup", "402|",
            "401|body=" + String.format(fifo, GROUP, "PULL", 0, "%RETRY%" + GROUP),
            "401|body=" + String.format(fifo, GROUP, "POP", 1, "NoSuchTopic"),
            "17|topic=AttrT|defaultTopic=TBW102|readQueueNums=2|writeQueueNums=2|perm=6|topicFilterType=SINGLE_TAG|order=false|attributes=+colour=red",
            "17|topic=AttrT|defaultTopic=TBW102|readQueueNums=2|writeQueueNums=2|perm=6|topicFilterType=SINGLE_TAG|order=false|attributes=-message.type",
            "17|topic=AttrT|defaultTopic=TBW102|readQueueNums=2|writeQueueNums=2|perm=6|topicFilterType=SINGLE_TAG|order=false|attributes=+message.type=MIXED",
            "17|topic=AttrT|defaultTopic=TBW102|readQueueNums=2|writeQueueNums=2|perm=6|topicFilterType=SINGLE_TAG|order=false|attributes=+message.type=FAST",
            "17|topic=AttrT|defaultTopic=TBW102|readQueueNums=2|writeQueueNums=2|perm=6|topicFilterType=SINGLE_TAG|order=false|attributes=+queue.type=Fast",
            "17|topic=AttrT|defaultTopic=TBW102|readQueueNums=2|writeQueueNums=2|perm=6|topicFilterType=SINGLE_TAG|order=false|attributes=+cleanup.policy=Keep",
            "17|topic=AttrT|defaultTopic=TBW102|readQueueNums=2|writeQueueNums=2|perm=6|topicFilterType=SINGLE_TAG|order=false|attributes=+reserve.time=x",
            "17|topic=AttrT|defaultTopic=TBW102|readQueueNums=2|writeQueueNums=2|perm=6|topicFilterType=SINGLE_TAG|order=false|attributes=message.type=FIFO",
            "17|topic=AttrT|defaultTopic=TBW102|readQueueNums=2|writeQueueNums=2|perm=6|topicFilterType=SINGLE_TAG|order=false|attributes=+queue.type=SimpleCQ,+message.type=DELAY",
            "351|topic=AttrT",
            "17|topic=AttrT|defaultTopic=TBW102|readQueueNums=2|writeQueueNums=2|perm=6|topicFilterType=SINGLE_TAG|order=false|attributes=+queue.type=BatchCQ",
            "17|topic=AttrT|defaultTopic=TBW102|readQueueNums=2|writeQueueNums=2|perm=6|topicFilterType=SINGLE_TAG|order=false|attributes=-message.type",
            "351|topic=AttrT",
            "400|body=" + query(TOPIC, GROUP, "client-1", "AVG", "CLUSTERING"),
            "400|body=" + query(TOPIC, "PullG", "client-1", "AVG", "CLUSTERING"),
            "400|body=" + query(TOPIC, "PullG", "client-2", "AVG", "CLUSTERING"),
            "400|body=" + query(TOPIC, "PullG", "client-2", "AVG_BY_CIRCLE", "CLUSTERING"),
            "400|body=" + query(TOPIC, "PullG", "stranger", "AVG", "CLUSTERING"),
            "400|body=" + query(TOPIC, "PullG", "client-1", "CONSISTENT_HASH", "CLUSTERING"),
            "400|body=" + query(TOPIC, "NobodyG", "client-1", "AVG", "CLUSTERING"),
            "400|body=" + query(TOPIC, GROUP, "client-1", "AVG", "BROADCASTING"),
            "400|body=" + query("NoSuchTopic", GROUP, "client-1", "AVG", "CLUSTERING"),
            "401|body=" + String.format(fifo, GROUP, "POP", 1, TOPIC),
            "400|body=" + query(TOPIC, GROUP, "client-2", "AVG", "CLUSTERING"),
            "402|");
        List<String> fromJava = new ArrayList<>();
        List<String> fromOurs = new ArrayList<>();
        for (String r : requests) {
            fromJava.add(r + "  ->  " + answer(java.address(), r));
            fromOurs.add(r + "  ->  " + answer(ours.address(), r));
        }
        assertEquals(String.join("\n", fromJava), String.join("\n", fromOurs));
        // The attribute reached the topic file as Java writes it.
        String topics = Files.readString(ours.storeDir().resolve("config/topics.json"));
        assertTrue(topics.contains("\"message.type\":\"FIFO\""), topics);
    }

    /**
     * A 5.3.3 push consumer with {@code clientRebalance=false} (ROCKETMQ headers with ours, JSON with Java's), after
     * {@code setConsumeMode -m POP -q 8} for its group: it holds the queue -1 of the topic's broker for pop on both (it
     * cannot receive from ours until POP_MESSAGE exists). The topic lives on one broker each, so the client's
     * QUERY_ASSIGNMENT goes to that broker.
     */
    @Test
    void aPushConsumerWithoutClientRebalanceGetsItsAssignment() throws Exception {
        String create = "17|defaultTopic=TBW102|readQueueNums=4|writeQueueNums=4|perm=6|topicFilterType=SINGLE_TAG|order=false|topic=";
        String mode = "401|body={\"consumerGroup\":\"PopC\",\"mode\":\"POP\",\"popShareQueueNum\":8,\"topic\":\"%s\"}";
        String created = "code 0 remark not set any response code body null";
        assertEquals(created, answer(ours.address(), create + "PopTopicOurs"));
        assertEquals(created, answer(java.address(), create + "PopTopicJava"));
        assertEquals("code 0 remark null body null", answer(ours.address(), String.format(mode, "PopTopicOurs")));
        assertEquals("code 0 remark null body null", answer(java.address(), String.format(mode, "PopTopicJava")));
        for (String topic : List.of("PopTopicOurs", "PopTopicJava")) {
            Await.until(topic + " routed", Duration.ofSeconds(30), () -> probe.route(topic),
                route -> route != null && !route.getQueueDatas().isEmpty(), () -> "");
        }
        CompletableFuture<DriverRun> onOurs = CompletableFuture.supplyAsync(() -> DriverRun.run("PopAssignmentDriver", "rocketmq-client",
            Versions.JAVA_5, "ROCKETMQ", dir.resolve("driver-ours"), namesrv.address(), "PopTopicOurs", "PopC"));
        DriverRun onJava = DriverRun.run("PopAssignmentDriver", "rocketmq-client", Versions.JAVA_5, "JSON", dir.resolve("driver-java"),
            namesrv.address(), "PopTopicJava", "PopC");
        DriverRun onOur = onOurs.join();
        onJava.assertOk("assignment");
        onOur.assertOk("assignment");
        assertEquals("[pop-java:-1]", onJava.result("assignment").get("pop"));
        assertEquals("[pop-rust:-1]", onOur.result("assignment").get("pop"));
        assertEquals("[]", onOur.result("assignment").get("pull"));
    }

    /**
     * PEEK_MESSAGE (200052), NOTIFICATION (200054) and POLLING_INFO (200055): the same raw requests to both brokers,
     * good and bad, get the same code, remark and response header (peeked messages compared by topic, queue, offset
     * and body, sorted: Java starts at a random queue). A notification with a poll time on an empty queue answers
     * {@code hasMsg=false} at its time; one parked on an empty topic is woken by a send to it; a pop parked on an
     * empty topic counts in POLLING_INFO for its group and queue. Java 5.3.3 reads these headers leniently (a missing
     * or unreadable number is 0; a missing topic or group is a NullPointerException). A SYSTEM_ERROR's remark is
     * Java's exception with its first stack frame: compared without the frame (a NullPointerException by its class).
     */
    @Test
    void peekNotificationAndPollingInfoAreJavas() throws Exception {
        String create = "17|defaultTopic=TBW102|readQueueNums=4|writeQueueNums=4|perm=6|topicFilterType=SINGLE_TAG|order=false|topic=";
        for (String addr : List.of(ours.address(), java.address())) {
            for (String topic : List.of("PeekT", "PeekEmpty", "PeekWake")) {
                assertEquals("code 0 remark not set any response code body null", answer(addr, create + topic));
            }
            sendRaw(addr, "PeekT", 0, "peek-a");
            sendRaw(addr, "PeekT", 0, "peek-b");
            sendRaw(addr, "PeekT", 1, "peek-c");
            // A send is answered before its consume queue has it (both brokers dispatch behind the log): the
            // peeks must see all three, on both.
            awaitMaxOffset(addr, "PeekT", 0, 2);
            awaitMaxOffset(addr, "PeekT", 1, 1);
        }
        String g = "|consumerGroup=PeekG";
        List<String> requests = List.of(
            "200052|topic=PeekT|queueId=-1|maxMsgNums=32" + g,
            "200052|topic=PeekT|queueId=0|maxMsgNums=1" + g,
            "200052|topic=PeekT|queueId=1|maxMsgNums=0" + g,
            "200052|topic=PeekT|queueId=3|maxMsgNums=32" + g,
            "200052|topic=PeekEmpty|queueId=-1|maxMsgNums=32" + g,
            "200052|topic=PeekT|queueId=0|maxMsgNums=-1" + g,
            "200052|topic=PeekT|queueId=4|maxMsgNums=1" + g,
            "200052|topic=NoSuchTopic|queueId=-1|maxMsgNums=1" + g,
            "200052|topic=bad/topic|queueId=-1|maxMsgNums=1" + g,
            "200052|topic=PeekT|queueId=-1|maxMsgNums=1|consumerGroup=bad/group",
            "200052|topic=PeekT|queueId=-1" + g,
            "200052|topic=PeekT|queueId=zero|maxMsgNums=2" + g,
            "200052|queueId=-1|maxMsgNums=2" + g,
            "200052|topic=PeekT|queueId=-1|maxMsgNums=2",
            "200054|topic=PeekT|queueId=-1|pollTime=0|bornTime=0" + g,
            "200054|topic=PeekT|queueId=1|pollTime=0" + g,
            "200054|topic=PeekT|queueId=3|pollTime=0|bornTime=0|order=true|attemptId=a1" + g,
            "200054|topic=PeekT|queueId=-5|pollTime=0|bornTime=0" + g,
            "200054|topic=PeekEmpty|queueId=-1|pollTime=0|bornTime=0" + g,
            "200054|topic=PeekEmpty|queueId=2|pollTime=800|bornTime=0" + g,
            "200054|topic=PeekEmpty|queueId=2|pollTime=800|bornTime=1" + g,
            "200054|topic=PeekT|queueId=9|pollTime=0|bornTime=0" + g,
            "200054|topic=NoSuchTopic|queueId=-1|pollTime=0|bornTime=0" + g,
            "200054|topic=PeekT|queueId=-1|bornTime=0" + g,
            "200054|queueId=-1|pollTime=0" + g,
            "200055|topic=PeekEmpty|queueId=-1" + g,
            "200055|topic=PeekT|queueId=2" + g,
            "200055|topic=PeekT|queueId=4" + g,
            "200055|topic=NoSuchTopic|queueId=-1" + g,
            "200055|topic=PeekT|queueId=0|consumerGroup=bad/group",
            "200055|topic=PeekT" + g,
            "200055|topic=PeekT|queueId=0");
        List<String> fromJava = new ArrayList<>();
        List<String> fromOurs = new ArrayList<>();
        for (String r : requests) {
            fromJava.add(r + "  ->  " + popAnswer(java.address(), r));
            fromOurs.add(r + "  ->  " + popAnswer(ours.address(), r));
        }
        // Parked: a pop on an empty topic counts for its group and queue (-1) while it waits; a notification on an
        // empty topic is woken by a send to it.
        for (String addr : List.of(java.address(), ours.address())) {
            List<String> into = addr.equals(java.address()) ? fromJava : fromOurs;
            String pop = "200050|consumerGroup=PeekG|topic=PeekEmpty|queueId=-1|maxMsgNums=8|invisibleTime=30000|pollTime=3000"
                + "|initMode=0|expType=TAG|exp=*|bornTime=" + System.currentTimeMillis();
            CompletableFuture<String> parked = CompletableFuture.supplyAsync(() -> call(0, addr, pop, 10_000));
            Thread.sleep(800);
            for (String r : List.of("200055|topic=PeekEmpty|queueId=-1" + g, "200055|topic=PeekEmpty|queueId=0" + g,
                "200055|topic=PeekEmpty|queueId=-1|consumerGroup=OtherG")) {
                into.add("while a pop waits: " + r + "  ->  " + popAnswer(addr, r));
            }
            // Its header's numbers (popTime, reviveQid) follow each broker's own history: code and remark only.
            into.add("the parked pop  ->  " + parked.join().replaceAll(" header \\{.*\\} body", " body"));
            into.add("after it: 200055  ->  " + popAnswer(addr, "200055|topic=PeekEmpty|queueId=-1" + g));
            String note = "200054|topic=PeekWake|queueId=-1|pollTime=6000|bornTime=" + System.currentTimeMillis() + g;
            long started = System.nanoTime();
            CompletableFuture<String> waiting = CompletableFuture.supplyAsync(() -> call(1, addr, note, 10_000));
            Thread.sleep(800);
            sendRaw(addr, "PeekWake", 2, "wake");
            String woken = waiting.join();
            long ms = Duration.ofNanos(System.nanoTime() - started).toMillis();
            into.add("a notification parked, then a send  ->  " + woken + " within 4 s: " + (ms < 4000));
        }
        System.out.println("[peek] Java 5.3.3:\n" + String.join("\n", fromJava));
        assertEquals(String.join("\n", fromJava), String.join("\n", fromOurs));
    }

    /** Waits until GET_MAX_OFFSET (30) of a queue of a broker answers {@code want}. */
    private void awaitMaxOffset(String addr, String topic, int queueId, long want) {
        Await.until(addr + ": max offset of " + topic + "/" + queueId, Duration.ofSeconds(10),
            () -> clients.get(2).getRemotingClient().invokeSync(addr, request("30|topic=" + topic + "|queueId=" + queueId), 5000)
                .getExtFields().get("offset"),
            offset -> String.valueOf(want).equals(offset), () -> "");
    }

    /** SEND_MESSAGE (10) of one message to a queue of a broker. */
    private void sendRaw(String addr, String topic, int queueId, String body) throws Exception {
        String spec = "10|producerGroup=PeekP|topic=" + topic + "|defaultTopic=TBW102|defaultTopicQueueNums=4|queueId=" + queueId
            + "|sysFlag=0|bornTimestamp=" + System.currentTimeMillis() + "|flag=0|properties=|reconsumeTimes=0|unitMode=false"
            + "|body=" + body;
        RemotingCommand response = clients.get(2).getRemotingClient().invokeSync(addr, request(spec), 5000);
        assertEquals(0, response.getCode(), addr + " " + spec + ": " + response.getRemark());
    }

    private static RemotingCommand request(String spec) {
        String[] parts = spec.split("\\|");
        RemotingCommand request = RemotingCommand.createRequestCommand(Integer.parseInt(parts[0]), null);
        for (int i = 1; i < parts.length; i++) {
            String[] kv = parts[i].split("=", 2);
            if (kv[0].equals("body")) {
                request.setBody(kv[1].getBytes(StandardCharsets.UTF_8));
            } else {
                request.addExtField(kv[0], kv[1]);
            }
        }
        return request;
    }

    private String call(int client, String addr, String spec, long timeoutMs) {
        try {
            return describe(clients.get(client).getRemotingClient().invokeSync(addr, request(spec), timeoutMs));
        } catch (Exception e) {
            return "failed: " + e;
        }
    }

    private String popAnswer(String addr, String spec) throws Exception {
        return describe(clients.get(2).getRemotingClient().invokeSync(addr, request(spec), 15_000));
    }

    /**
     * Code, remark (client ports out; a SYSTEM_ERROR's up to its stack frame, its exception's class name out), the
     * header's fields but the times of a pop, and the messages of a body (sorted).
     */
    private static String describe(RemotingCommand response) {
        String remark = String.valueOf(response.getRemark()).replaceAll("127\\.0\\.0\\.1:\\d+", "127.0.0.1:PORT");
        if (response.getCode() == 1) {
            remark = remark.replaceAll(", [\\w.$<>/]+\\([\\w.]+:\\d+\\)$", "");
            if (remark.startsWith("java.lang.NullPointerException")) {
                remark = "java.lang.NullPointerException"; // the JDK's helpful message varies by JDK
            }
        }
        TreeMap<String, String> ext = new TreeMap<>(response.getExtFields() == null ? Map.of() : response.getExtFields());
        if (response.getCode() == 0 && ext.containsKey("popTime") && !ext.get("popTime").equals("0")) {
            ext.put("popTime", "set");
        }
        String body = "null";
        if (response.getBody() != null) {
            List<String> messages = new ArrayList<>();
            for (MessageExt m : MessageDecoder.decodes(ByteBuffer.wrap(response.getBody()))) {
                messages.add(m.getTopic() + "/" + m.getQueueId() + "@" + m.getQueueOffset() + " "
                    + new String(m.getBody(), StandardCharsets.UTF_8) + " rt" + m.getReconsumeTimes());
            }
            Collections.sort(messages);
            body = messages.toString();
        }
        return "code " + response.getCode() + " remark " + remark + " header " + ext + " body " + body;
    }

    private void heartbeat(MQClientAPIImpl api, String addr, String clientId) throws Exception {
        HeartbeatData data = new HeartbeatData();
        data.setClientID(clientId);
        for (String group : List.of(GROUP, "PullG")) {
            ConsumerData consumer = new ConsumerData();
            consumer.setGroupName(group);
            consumer.setConsumeType(ConsumeType.CONSUME_PASSIVELY);
            consumer.setMessageModel(MessageModel.CLUSTERING);
            consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_LAST_OFFSET);
            SubscriptionData sub = new SubscriptionData();
            sub.setTopic(TOPIC);
            sub.setSubString("*");
            consumer.getSubscriptionDataSet().add(sub);
            data.getConsumerDataSet().add(consumer);
        }
        api.sendHeartbeat(addr, data, 5000);
    }

    private static String query(String topic, String group, String clientId, String strategy, String model) {
        return String.format("{\"clientId\":\"%s\",\"consumerGroup\":\"%s\",\"messageModel\":\"%s\",\"strategyName\":\"%s\",\"topic\":\"%s\"}",
            clientId, group, model, strategy, topic);
    }

    /** "CODE|key=value|...", a "body=" entry being the body; assignments sorted (Java's are a HashSet). */
    private String answer(String addr, String spec) throws Exception {
        String[] parts = spec.split("\\|");
        RemotingCommand request = RemotingCommand.createRequestCommand(Integer.parseInt(parts[0]), null);
        for (int i = 1; i < parts.length; i++) {
            if (parts[i].isEmpty()) {
                continue;
            }
            String[] kv = parts[i].split("=", 2);
            if (kv[0].equals("body")) {
                request.setBody(kv[1].getBytes(StandardCharsets.UTF_8));
            } else {
                request.addExtField(kv[0], kv[1]);
            }
        }
        RemotingCommand response = clients.get(2).getRemotingClient().invokeSync(addr, request, 5000);
        String body = response.getBody() == null ? "null" : new String(response.getBody(), StandardCharsets.UTF_8);
        if (request.getCode() == 400 && response.getCode() == 0) {
            JSONArray assignments = JSON.parseObject(body).getJSONArray("messageQueueAssignments");
            List<String> sorted = new ArrayList<>();
            if (assignments != null) {
                assignments.forEach(a -> sorted.add(JSON.toJSONString(a)));
                Collections.sort(sorted);
            }
            body = assignments == null ? body : "sorted " + sorted;
        }
        return "code " + response.getCode() + " remark " + response.getRemark() + " body " + body;
    }

    /** One mqadmin command against both brokers ("ADDR" standing for each one's address): the same output. */
    private void onBoth(String command, String... args) {
        CompletableFuture<MqAdminRun> onOurs = CompletableFuture.supplyAsync(() -> mqadmin.run(command, with(args, ours.address())));
        MqAdminRun onJava = mqadmin.run(command, with(args, java.address()));
        MqAdminRun onOur = onOurs.join();
        assertEquals(onJava.stdout().replace(java.address(), "ADDR"), onOur.stdout().replace(ours.address(), "ADDR"),
            onJava.describe() + onOur.describe());
        assertTrue(onOur.stderr().lines().noneMatch(l -> l.contains("Exception")), onOur.describe());
    }

    private static String[] with(String[] args, String addr) {
        String[] actual = args.clone();
        for (int i = 0; i < actual.length; i++) {
            actual[i] = actual[i].equals("ADDR") ? addr : actual[i];
        }
        return actual;
    }
}
