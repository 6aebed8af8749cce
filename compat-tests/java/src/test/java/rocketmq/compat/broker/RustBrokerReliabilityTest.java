package rocketmq.compat.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;

import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.MethodOrderer;
import org.junit.jupiter.api.Order;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.TestMethodOrder;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import rocketmq.compat.client.DriverRun;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * What our broker does to messages after the send, with the Java clients 4.9.x and 5.x: transactions with
 * check-back, delay levels, retry through the group's retry topic, dead letters, and orderly consumption with
 * queue locks ({@code ReliabilityDriver}). The broker runs with short delay levels and a transaction check
 * every second so that the flows take seconds, not minutes.
 *
 * <p>{@code -Drmq.reliability.broker=java} runs the same class against a Java broker 5.x instead: the
 * driver's assertions describe Java's behaviour and were checked that way.
 */
@DisplayName("our broker: transactions, delays, retry, DLQ, orderly")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@ExtendWith(DumpLogsOnFailure.class)
class RustBrokerReliabilityTest {
    private static final String CLUSTER = "ReliabilityCluster";
    private static final String BROKER = "reliability-broker";
    /** Levels 1 to 3 differ, so that each is seen to be kept; the rest (retries use 3 + reconsumeTimes) are short. */
    private static final String DELAY_LEVELS = "1s 2s 3s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s 1s";
    private static final String LEVEL_1_TO_3_MS = "1000,2000,3000";

    @TempDir
    static Path dir;
    private NameServer namesrv;
    private AutoCloseable broker;
    private java.util.function.Supplier<String> describe;

    @BeforeAll
    void start() {
        namesrv = NameServer.start(dir.resolve("namesrv"));
        Map<String, String> conf = new LinkedHashMap<>();
        conf.put("messageDelayLevel", DELAY_LEVELS);
        conf.put("transactionCheckInterval", "1000");
        conf.put("transactionTimeOut", "1000");
        if ("java".equals(System.getProperty("rmq.reliability.broker"))) {
            JavaBroker java = JavaBroker.start(Versions.JAVA_5, dir.resolve("broker"), namesrv.address(), CLUSTER, BROKER, conf);
            broker = java;
            describe = () -> java.describe(40);
        } else {
            RustBroker rust = RustBroker.start(dir.resolve("broker"), namesrv.address(), CLUSTER, BROKER, conf);
            broker = rust;
            describe = () -> rust.describe(40);
        }
        try (NamesrvProbe probe = NamesrvProbe.connect(namesrv.address())) {
            Await.until("broker " + BROKER + " registered", Duration.ofSeconds(60), probe::clusterInfo,
                info -> info.getBrokerAddrTable() != null && info.getBrokerAddrTable().containsKey(BROKER),
                () -> describe.get() + "\n" + namesrv.describe(20));
        }
    }

    @AfterAll
    void stop() throws Exception {
        if (broker != null) {
            broker.close();
        }
        if (namesrv != null) {
            namesrv.close();
        }
    }

    static Stream<Arguments> clients() {
        return Stream.of(Arguments.of(Versions.JAVA_49, "JSON"), Arguments.of(Versions.JAVA_5, "ROCKETMQ"));
    }

    private static String tag(String version, String serializeType) {
        return "c" + version.replace('.', '_') + "_" + serializeType;
    }

    private DriverRun drive(String version, String serializeType, String what, String... steps) {
        String[] args = new String[steps.length + 1];
        args[0] = namesrv.address();
        System.arraycopy(steps, 0, args, 1, steps.length);
        DriverRun run = DriverRun.run("ReliabilityDriver", "rocketmq-client", version, serializeType,
            dir.resolve("drivers").resolve(what + "-" + tag(version, serializeType)), args);
        System.out.println("reliability: " + run.summary());
        return run;
    }

    private void assertAllOk(DriverRun run, String... steps) {
        for (String step : steps) {
            run.assertOk(step);
        }
        assertEquals(0, run.exitCode(), run.report() + "\n" + describe.get());
    }

    /** COMMIT delivered, ROLLBACK not, UNKNOW resolved by CHECK_TRANSACTION_STATE either way. */
    @ParameterizedTest(name = "client {0} with {1} headers")
    @MethodSource("clients")
    @Order(1)
    void transactions(String version, String serializeType) {
        String t = tag(version, serializeType);
        assertAllOk(drive(version, serializeType, "tx", "transactions:RelTx_" + t), "transactions");
    }

    /** Levels 1 to 3 (1 s, 2 s, 3 s here) are stored in their topic, and consumed, no earlier than their delay. */
    @ParameterizedTest(name = "client {0} with {1} headers")
    @MethodSource("clients")
    @Order(2)
    void delayLevels(String version, String serializeType) {
        String t = tag(version, serializeType);
        assertAllOk(drive(version, serializeType, "delay", "delay:RelDelay_" + t + ":" + LEVEL_1_TO_3_MS), "delay");
    }

    /** Three failures then success: four deliveries through %RETRY%group; always failing: 17, then %DLQ%group. */
    @ParameterizedTest(name = "client {0} with {1} headers")
    @MethodSource("clients")
    @Order(3)
    void retryAndDeadLetters(String version, String serializeType) {
        String t = tag(version, serializeType);
        assertAllOk(drive(version, serializeType, "retry", "retry:RelRetry_" + t + ":rel_retry_group_" + t,
            "dlq:RelDlq_" + t + ":rel_dlq_group_" + t), "retry", "dlq");
    }

    /** Two, then three orderly consumers: locked queues, each order in send order at one consumer. */
    @ParameterizedTest(name = "client {0} with {1} headers")
    @MethodSource("clients")
    @Order(4)
    void orderlyConsumptionWithQueueLocks(String version, String serializeType) {
        String t = tag(version, serializeType);
        assertAllOk(drive(version, serializeType, "orderly", "orderly:RelOrder_" + t + ":rel_order_group_" + t), "orderly");
    }
}
