package rocketmq.compat.client;

import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.stream.Stream;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
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
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import rocketmq.compat.broker.BrokerProbe;
import rocketmq.compat.broker.RustBroker;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.mqadmin.EachTools;
import rocketmq.compat.mqadmin.MqAdmin;
import rocketmq.compat.mqadmin.MqAdminRun;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * Message trace end to end through our broker: with {@code traceTopicEnable=true} it creates
 * {@code RMQ_SYS_TRACE_TOPIC} at start; Java producers and consumers with message trace on (4.9.7 and 5.3.3,
 * crossed) publish their Pub and SubBefore/SubAfter records to it; every stored message carries
 * {@code MSG_REGION} and {@code TRACE_ON} as Java 5.x stores them; and mqadmin {@code queryMsgTraceById}
 * of 4.9.7 and 5.3.3 prints both the producer's and the consumer's records of a message.
 */
@DisplayName("message trace through our broker")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@ExtendWith(DumpLogsOnFailure.class)
class MessageTraceTest {
    static final String CLUSTER = "TraceCluster";
    static final String BROKER = "trace-broker-a";
    static final String TRACE_TOPIC = "RMQ_SYS_TRACE_TOPIC";
    static final int MESSAGES = 3;
    private static final Duration ROUTE_TIMEOUT = Duration.ofSeconds(30);
    private static final Duration TRACE_TIMEOUT = Duration.ofSeconds(40);

    @TempDir
    static Path dir;
    NameServer namesrv;
    RustBroker broker;
    NamesrvProbe probe;
    BrokerProbe brokerProbe;
    EachTools tools;

    @BeforeAll
    void start() {
        namesrv = NameServer.start(dir.resolve("namesrv"));
        broker = RustBroker.start(dir.resolve("broker"), namesrv.address(), CLUSTER, BROKER, java.util.Map.of("traceTopicEnable", "true"));
        probe = NamesrvProbe.connect(namesrv.address());
        brokerProbe = BrokerProbe.connect(broker.address(), BROKER);
        tools = new EachTools(List.of(
            new MqAdmin(Versions.JAVA_49, "JSON", namesrv.address(), dir.resolve("mqadmin49")),
            new MqAdmin(Versions.JAVA_5, "ROCKETMQ", namesrv.address(), dir.resolve("mqadmin5"))));
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
    @Order(1)
    @DisplayName("with traceTopicEnable the broker creates RMQ_SYS_TRACE_TOPIC at start and registers it")
    void traceTopicAtStart() throws Exception {
        assertTrue(brokerProbe.hasTopic(TRACE_TOPIC), TRACE_TOPIC + " in the broker's topics");
        Await.until("route of " + TRACE_TOPIC, ROUTE_TIMEOUT, () -> probe.route(TRACE_TOPIC),
            (TopicRouteData r) -> r != null && !r.getQueueDatas().isEmpty(), () -> broker.describe(40));
    }

    static Stream<Arguments> producerAndConsumer() {
        return Stream.of(
            Arguments.of(Versions.JAVA_49, "JSON", Versions.JAVA_5, "ROCKETMQ"),
            Arguments.of(Versions.JAVA_5, "ROCKETMQ", Versions.JAVA_49, "JSON"));
    }

    @ParameterizedTest(name = "producer {0} {1}, consumer {2} {3}")
    @MethodSource("producerAndConsumer")
    @Order(2)
    @DisplayName("Pub and Sub records of a traced producer and consumer, found by queryMsgTraceById")
    void traceRecordsOfBothSides(String producerVersion, String producerSerialize, String consumerVersion,
                                 String consumerSerialize) throws Exception {
        String tag = "p" + producerVersion.charAt(0) + "c" + consumerVersion.charAt(0);
        String topic = "TraceTopic_" + tag;
        String producerGroup = "trace_producer_" + tag;
        String consumerGroup = "trace_consumer_" + tag;
        brokerProbe.createTopic(topic, 4);
        Await.until("route of " + topic, ROUTE_TIMEOUT, () -> probe.route(topic),
            (TopicRouteData r) -> r != null && !r.getQueueDatas().isEmpty(), () -> broker.describe(40));

        DriverRun produced = DriverRun.run("ReplyTraceDriver", "rocketmq-client", producerVersion, producerSerialize,
            dir.resolve("produce-" + tag), namesrv.address(), "traceProduce:" + topic + ":" + producerGroup + ":" + MESSAGES);
        System.out.println("producer: " + produced.summary());
        produced.assertOk("traceProduce");
        List<String[]> sent = produced.lines("TRACED ");
        assertFalse(sent.isEmpty(), "no message ids printed");

        DriverRun consumed = DriverRun.run("ReplyTraceDriver", "rocketmq-client", consumerVersion, consumerSerialize,
            dir.resolve("consume-" + tag), namesrv.address(), "traceConsume:" + topic + ":" + consumerGroup + ":" + MESSAGES);
        System.out.println("consumer: " + consumed.summary());
        consumed.assertOk("traceConsume");
        assertFalse(consumed.lines("CONSUMED ").isEmpty(), "no consumed message printed");
        for (String[] c : consumed.lines("CONSUMED ")) {
            String line = String.join(" ", c);
            assertTrue(line.contains("region=DefaultRegion") && line.contains("traceOn=true"),
                "a consumed message without Java's MSG_REGION / TRACE_ON: " + line);
        }

        String msgId = sent.get(0)[0];
        tools.concurrently("queryMsgTraceById " + msgId, admin -> {
            MqAdminRun run = Await.until("queryMsgTraceById " + msgId + " shows Pub by " + producerGroup + " and Sub by "
                    + consumerGroup + " [tools " + admin.version() + "]", TRACE_TIMEOUT,
                () -> admin.run("queryMsgTraceById", "-i", msgId),
                r -> hasRecord(r, "Pub", producerGroup) && hasRecord(r, "Sub", consumerGroup),
                () -> broker.describe(20));
            System.out.println(run.describe());
        });
    }

    @Test
    @Order(3)
    @DisplayName("with the defaults (traceTopicEnable=false) the trace topic is not made at start; the first trace record auto-creates it")
    void defaultsAutoCreateTheTraceTopic() throws Exception {
        try (NameServer ns = NameServer.start(dir.resolve("namesrv-default"));
             NamesrvProbe nsProbe = NamesrvProbe.connect(ns.address());
             RustBroker plain = RustBroker.start(dir.resolve("broker-default"), ns.address(), "PlainCluster", "plain-broker-a");
             BrokerProbe plainProbe = BrokerProbe.connect(plain.address(), "plain-broker-a")) {
            assertFalse(plainProbe.hasTopic(TRACE_TOPIC), TRACE_TOPIC + " made at start without traceTopicEnable");
            plainProbe.createTopic("PlainTraceTopic", 4);
            Await.until("route of PlainTraceTopic", ROUTE_TIMEOUT, () -> nsProbe.route("PlainTraceTopic"),
                (TopicRouteData r) -> r != null && !r.getQueueDatas().isEmpty(), () -> plain.describe(40));
            DriverRun produced = DriverRun.run("ReplyTraceDriver", "rocketmq-client", Versions.JAVA_49, "JSON",
                dir.resolve("produce-default"), ns.address(), "traceProduce:PlainTraceTopic:plain_trace_producer:1");
            produced.assertOk("traceProduce");
            String msgId = produced.lines("TRACED ").get(0)[0];
            MqAdmin admin = new MqAdmin(Versions.JAVA_5, "ROCKETMQ", ns.address(), dir.resolve("mqadmin-default"));
            Await.until("queryMsgTraceById " + msgId + " shows the Pub record", TRACE_TIMEOUT,
                () -> admin.run("queryMsgTraceById", "-i", msgId), r -> hasRecord(r, "Pub", "plain_trace_producer"), () -> plain.describe(20));
            assertTrue(plainProbe.hasTopic(TRACE_TOPIC), TRACE_TOPIC + " auto-created by the first trace record");
        }
    }

    /** A line of the trace table: the type (Pub, Sub), then the group. */
    private static boolean hasRecord(MqAdminRun run, String type, String group) {
        return run.stdoutLines().stream().map(l -> l.trim().split("\\s+"))
            .anyMatch(w -> w.length >= 2 && w[0].equals(type) && w[1].equals(group));
    }
}
