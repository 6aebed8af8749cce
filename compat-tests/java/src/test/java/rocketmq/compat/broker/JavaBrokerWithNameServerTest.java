package rocketmq.compat.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.Set;
import java.util.stream.Stream;
import org.apache.rocketmq.common.protocol.body.ClusterInfo;
import org.apache.rocketmq.common.protocol.route.BrokerData;
import org.apache.rocketmq.common.protocol.route.QueueData;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
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
import rocketmq.compat.client.ProduceConsumeRun;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;

/**
 * One name server and one Java broker of {@link #brokerVersion()} for the whole class: the broker must
 * register, its routes must be served, and official clients must move 1,000 messages through them.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@ExtendWith(DumpLogsOnFailure.class)
abstract class JavaBrokerWithNameServerTest {
    static final String CLUSTER = "CompatCluster";
    static final int MESSAGES = 1000;
    private static final Duration REGISTER_TIMEOUT = Duration.ofSeconds(60);

    /** Static: JUnit creates it before {@code @BeforeAll} (instance fields come later). */
    @TempDir
    static Path dir;
    NameServer namesrv;
    JavaBroker broker;
    NamesrvProbe probe;

    abstract String brokerVersion();

    /** (client version, header encoding) pairs to run the produce/consume test with. */
    abstract Stream<Arguments> clients();

    @BeforeAll
    void startNameServerAndBroker() {
        namesrv = NameServer.start(dir.resolve("namesrv"));
        broker = JavaBroker.start(brokerVersion(), dir.resolve("broker"), namesrv.address(), CLUSTER,
            "broker-" + brokerVersion().replace('.', '_'));
        probe = NamesrvProbe.connect(namesrv.address());
    }

    @AfterAll
    void stopEverything() {
        if (probe != null) {
            probe.close();
        }
        if (broker != null) {
            broker.close();
        }
        if (namesrv != null) {
            namesrv.close();
        }
    }

    /** Polls GET_BROKER_CLUSTER_INFO until the broker's address is listed. */
    ClusterInfo awaitRegistration() {
        return Await.until("broker " + broker.brokerName() + " at " + broker.address() + " in the cluster info",
            REGISTER_TIMEOUT, probe::clusterInfo,
            info -> info.getBrokerAddrTable() != null && info.getBrokerAddrTable().containsKey(broker.brokerName()),
            () -> namesrv.describe(40) + "\n" + broker.describe(40));
    }

    @Test
    @Order(1)
    void brokerRegistersWithTheNameServer() {
        ClusterInfo info = awaitRegistration();
        assertEquals(Set.of(broker.brokerName()), info.getClusterAddrTable().get(CLUSTER),
            "cluster -> broker names: " + info.getClusterAddrTable());
        BrokerData data = info.getBrokerAddrTable().get(broker.brokerName());
        assertEquals(CLUSTER, data.getCluster());
        assertEquals(broker.brokerName(), data.getBrokerName());
        assertEquals(Map.of(0L, broker.address()), data.getBrokerAddrs());
    }

    @Test
    @Order(2)
    void defaultTopicRouteLeadsToTheBrokerWithWritableQueues() throws Exception {
        awaitRegistration();
        TopicRouteData route = probe.route("TBW102");
        assertRouteLeadsToTheBroker(route);
    }

    @Test
    @Order(3)
    void unknownTopicIsAnsweredWithTopicNotExist() {
        awaitRegistration();
        Exception e = assertThrows(Exception.class, () -> probe.route("NoSuchTopic_" + System.nanoTime()));
        assertEquals(17, NamesrvProbe.responseCode(e), "expected response code 17 TOPIC_NOT_EXIST, got " + e);
    }

    @ParameterizedTest(name = "client {0} with {1} headers")
    @MethodSource("clients")
    @Order(4)
    void thousandMessagesGoThroughTheRouteFromProducerToConsumer(String clientVersion, String serializeType)
        throws Exception {
        awaitRegistration();
        String topic = "CompatTopic_c" + clientVersion.replace('.', '_') + "_" + serializeType;
        ProduceConsumeRun run = ProduceConsumeRun.run(clientVersion, serializeType, namesrv.address(), topic,
            MESSAGES, dir.resolve("client-" + clientVersion + "-" + serializeType));
        System.out.println("broker " + brokerVersion() + ": " + run.summary());
        String report = run.report() + "\n" + broker.describe(20) + "\n" + namesrv.describe(20);
        assertEquals("OK", run.field("status"), () -> "driver result not OK\n" + report);
        assertEquals(Integer.toString(MESSAGES), run.field("sent"), report);
        assertEquals(Integer.toString(MESSAGES), run.field("received"), report);
        assertEquals("0", run.field("bad"), report);
        assertEquals(0, run.exitCode(), report);
        // the broker registered the auto-created topic: the name server now routes it
        assertRouteLeadsToTheBroker(probe.route(topic));
    }

    /** Last: stops the broker (unregistration, or failing that its closed connection, must drop it). */
    @Test
    @Order(99)
    void brokerAndItsRoutesDisappearWhenTheBrokerStops() {
        awaitRegistration();
        broker.close();
        ClusterInfo info = Await.until("broker " + broker.brokerName() + " gone from the cluster info",
            REGISTER_TIMEOUT, probe::clusterInfo,
            ci -> ci.getBrokerAddrTable() == null || !ci.getBrokerAddrTable().containsKey(broker.brokerName()),
            () -> namesrv.describe(40) + "\n" + broker.describe(40));
        Set<String> brokersOfCluster = info.getClusterAddrTable() == null ? null : info.getClusterAddrTable().get(CLUSTER);
        assertTrue(brokersOfCluster == null || !brokersOfCluster.contains(broker.brokerName()),
            "cluster -> broker names: " + info.getClusterAddrTable());
        Exception e = assertThrows(Exception.class, () -> probe.route("TBW102"),
            "a topic served by no broker must have no route");
        assertEquals(17, NamesrvProbe.responseCode(e), "expected 17 TOPIC_NOT_EXIST, got " + e);
    }

    private void assertRouteLeadsToTheBroker(TopicRouteData route) {
        assertFalse(route.getBrokerDatas().isEmpty(), "no broker data in " + route);
        BrokerData data = route.getBrokerDatas().stream()
            .filter(b -> b.getBrokerName().equals(broker.brokerName())).findFirst()
            .orElseThrow(() -> new AssertionError("broker " + broker.brokerName() + " not in " + route));
        assertEquals(broker.address(), data.getBrokerAddrs().get(0L), "master address in " + route);
        QueueData queues = route.getQueueDatas().stream()
            .filter(q -> q.getBrokerName().equals(broker.brokerName())).findFirst()
            .orElseThrow(() -> new AssertionError("no queue data of " + broker.brokerName() + " in " + route));
        assertTrue(queues.getWriteQueueNums() > 0 && queues.getReadQueueNums() > 0, "queue counts in " + route);
        assertTrue((queues.getPerm() & 2) != 0 && (queues.getPerm() & 4) != 0, "perm must allow read and write: " + route);
    }
}
