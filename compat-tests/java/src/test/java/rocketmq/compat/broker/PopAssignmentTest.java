package rocketmq.compat.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONArray;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
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
        java = JavaBroker.start(Versions.JAVA_5, dir.resolve("java-broker"), namesrv.address(), "PopJava", "pop-java");
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
