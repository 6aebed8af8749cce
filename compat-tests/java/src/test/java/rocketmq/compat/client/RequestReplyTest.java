package rocketmq.compat.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import rocketmq.compat.broker.BrokerProbe;
import rocketmq.compat.broker.JavaBroker;
import rocketmq.compat.broker.RustBroker;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * Request-reply through our broker: a Java 4.9.7 requester's {@code DefaultMQProducer.request} is answered by
 * a Java 5.3.3 replier (push consumer + {@code MessageUtil.createReplyMessage}); the broker pushes each reply
 * to the requester (PUSH_REPLY_MESSAGE_TO_CLIENT) and stores it in {@code <cluster>_REPLY_TOPIC}, which it
 * created at start. A reply for a client that is not connected is refused with Java's code and remark.
 */
@DisplayName("request-reply through our broker")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class RequestReplyTest {
    static final String CLUSTER = "ReplyCluster";
    static final String BROKER = "reply-broker-a";
    static final String REPLY_TOPIC = CLUSTER + "_REPLY_TOPIC";
    static final String TOPIC = "RequestTopic";
    static final int REQUESTS = 5;
    private static final Duration ROUTE_TIMEOUT = Duration.ofSeconds(30);

    @TempDir
    static Path dir;
    NameServer namesrv;
    RustBroker broker;
    NamesrvProbe probe;
    BrokerProbe brokerProbe;

    @BeforeAll
    void start() throws Exception {
        namesrv = NameServer.start(dir.resolve("namesrv"));
        broker = RustBroker.start(dir.resolve("broker"), namesrv.address(), CLUSTER, BROKER);
        probe = NamesrvProbe.connect(namesrv.address());
        brokerProbe = BrokerProbe.connect(broker.address(), BROKER);
        brokerProbe.createTopic(TOPIC, 4);
        Await.until("route of " + TOPIC, ROUTE_TIMEOUT, () -> probe.route(TOPIC),
            (TopicRouteData r) -> r != null && !r.getQueueDatas().isEmpty(), () -> broker.describe(40));
    }

    @AfterAll
    void stop() {
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

    @Test
    @DisplayName("the broker creates <cluster>_REPLY_TOPIC at start, as Java does")
    void replyTopicExistsAtStart() throws Exception {
        assertTrue(brokerProbe.hasTopic(REPLY_TOPIC), REPLY_TOPIC + " in the broker's topics");
    }

    @Test
    @DisplayName("a 4.9.7 requester gets the replies of a 5.3.3 replier; a reply to nobody is refused")
    void requestAndReply() throws Exception {
        long storedBefore = brokerProbe.maxOffset(REPLY_TOPIC, 0);
        // The replier on 5.3.3 with binary headers, the requester on 4.9.7 with JSON headers.
        try (DriverRun.Running replier = DriverRun.start("ReplyTraceDriver", "rocketmq-client", Versions.JAVA_5, "ROCKETMQ",
            dir.resolve("replier"), namesrv.address(), "replier:" + TOPIC + ":replier_group:90")) {
            Await.until("the replier subscribed", Duration.ofSeconds(60), () -> {
                if (!replier.isAlive()) {
                    throw new AssertionError("the replier exited\n" + replier.describe(60));
                }
                return !replier.lines("READY").isEmpty();
            }, () -> replier.describe(60));
            DriverRun requester = DriverRun.run("ReplyTraceDriver", "rocketmq-client", Versions.JAVA_49, "JSON",
                dir.resolve("requester"), namesrv.address(),
                "request:" + TOPIC + ":" + REQUESTS, "requestAsync:" + TOPIC + ":3", "replyToNobody:" + CLUSTER);
            System.out.println("requester: " + requester.summary());
            requester.assertOk("request");
            requester.assertOk("requestAsync");
            requester.assertOk("replyToNobody");
            List<String[]> replied = replier.lines("REPLIED ");
            assertTrue(replied.size() >= REQUESTS, "the replier answered " + replied.size() + "\n" + replier.describe(40));
            for (String[] r : replied) {
                assertEquals("SEND_OK", r[1], "the replier's send status: " + String.join(" ", r));
            }
            // storeReplyMessageEnable (default true): every reply was also stored in the reply topic, and the
            // orphan reply too (Java stores it even though the push failed).
            long stored = brokerProbe.maxOffset(REPLY_TOPIC, 0) - storedBefore;
            assertTrue(stored >= replied.size() + 1, stored + " replies stored, " + replied.size() + " sent + 1 orphan");
        }
    }

    @Test
    @DisplayName("a Java 5.3.3 broker refuses the same orphan reply with the same code and remark")
    void javaBrokerRefusesTheOrphanAlike() {
        String javaCluster = "JavaReplyCluster";
        try (NameServer javaNamesrv = NameServer.start(dir.resolve("namesrv-java"));
             NamesrvProbe javaProbe = NamesrvProbe.connect(javaNamesrv.address());
             JavaBroker java = JavaBroker.start(Versions.JAVA_5, dir.resolve("java-broker"), javaNamesrv.address(), javaCluster, "java-reply-a")) {
            Await.until("route of " + javaCluster + "_REPLY_TOPIC", Duration.ofSeconds(60), () -> javaProbe.route(javaCluster + "_REPLY_TOPIC"),
                (TopicRouteData r) -> r != null && !r.getQueueDatas().isEmpty(), () -> java.describe(40));
            DriverRun run = DriverRun.run("ReplyTraceDriver", "rocketmq-client", Versions.JAVA_49, "JSON",
                dir.resolve("orphan-java"), javaNamesrv.address(), "replyToNobody:" + javaCluster);
            System.out.println("against Java 5.3.3: " + run.summary());
            run.assertOk("replyToNobody");
        }
    }
}
