package rocketmq.compat.client;

import java.nio.file.Path;
import java.time.Duration;
import java.util.Map;
import java.util.stream.Stream;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import org.junit.jupiter.params.ParameterizedTest;
import org.junit.jupiter.params.provider.Arguments;
import org.junit.jupiter.params.provider.MethodSource;
import rocketmq.compat.broker.BrokerProbe;
import rocketmq.compat.broker.JavaBroker;
import rocketmq.compat.broker.RustBroker;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * SQL92 property filters ({@code enablePropertyFilter=true}) through our broker with the Java clients 4.9.7 and
 * 5.3.3: a {@code MessageSelector.bySql} consumer gets exactly the matching messages, and one whose expression
 * does not parse is refused at start with SUBSCRIPTION_PARSE_FAILED (23); the same against a Java 5.3.3 broker.
 */
@DisplayName("SQL92 filters through our broker")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class SqlFilterTest {
    static final String CLUSTER = "SqlCluster";
    static final String BROKER = "sql-broker-a";
    private static final Duration ROUTE_TIMEOUT = Duration.ofSeconds(60);

    @TempDir
    static Path dir;
    NameServer namesrv;
    RustBroker broker;
    NamesrvProbe probe;
    BrokerProbe brokerProbe;

    @BeforeAll
    void start() {
        namesrv = NameServer.start(dir.resolve("namesrv"));
        broker = RustBroker.start(dir.resolve("broker"), namesrv.address(), CLUSTER, BROKER, Map.of("enablePropertyFilter", "true"));
        probe = NamesrvProbe.connect(namesrv.address());
        brokerProbe = BrokerProbe.connect(broker.address(), BROKER);
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

    static Stream<Arguments> clients() {
        return Stream.of(Arguments.of(Versions.JAVA_49, "JSON"), Arguments.of(Versions.JAVA_5, "ROCKETMQ"));
    }

    private static DriverRun drive(String version, String serializeType, Path where, String namesrv, String topic) {
        String tag = version.replace('.', '_');
        DriverRun run = DriverRun.run("SqlFilterDriver", "rocketmq-client", version, serializeType, where, namesrv,
            "sqlFilter:" + topic + ":sql_group_" + tag, "sqlRefused:" + topic + ":sql_bad_group_" + tag);
        System.out.println(run.summary());
        return run;
    }

    @ParameterizedTest(name = "client {0} {1}")
    @MethodSource("clients")
    @DisplayName("a bySql consumer gets exactly the matching messages; a broken expression is refused with 23")
    void filtersAndRefuses(String version, String serializeType) throws Exception {
        String topic = "SqlTopic_" + version.charAt(0);
        brokerProbe.createTopic(topic, 4);
        Await.until("route of " + topic, ROUTE_TIMEOUT, () -> probe.route(topic),
            (TopicRouteData r) -> r != null && !r.getQueueDatas().isEmpty(), () -> broker.describe(40));
        DriverRun run = drive(version, serializeType, dir.resolve("sql-" + version), namesrv.address(), topic);
        run.assertOk("sqlFilter");
        run.assertOk("sqlRefused");
    }

    @Test
    @DisplayName("without enablePropertyFilter a bySql consumer is refused at start with Java's code and remark")
    void refusedWithoutPropertyFilter() throws Exception {
        try (NameServer ns = NameServer.start(dir.resolve("namesrv-off"));
             NamesrvProbe nsProbe = NamesrvProbe.connect(ns.address());
             RustBroker off = RustBroker.start(dir.resolve("broker-off"), ns.address(), "SqlOffCluster", "sql-off-a");
             BrokerProbe offProbe = BrokerProbe.connect(off.address(), "sql-off-a")) {
            offProbe.createTopic("SqlOffTopic", 4);
            Await.until("route of SqlOffTopic", ROUTE_TIMEOUT, () -> nsProbe.route("SqlOffTopic"),
                (TopicRouteData r) -> r != null && !r.getQueueDatas().isEmpty(), () -> off.describe(40));
            DriverRun run = DriverRun.run("SqlFilterDriver", "rocketmq-client", Versions.JAVA_5, "JSON", dir.resolve("sql-off"),
                ns.address(), "sqlUnsupported:SqlOffTopic:sql_off_group");
            System.out.println(run.summary());
            run.assertOk("sqlUnsupported");
        }
    }

    @Test
    @DisplayName("a Java 5.3.3 broker filters and refuses alike")
    void javaBrokerAlike() throws Exception {
        try (NameServer javaNamesrv = NameServer.start(dir.resolve("namesrv-java"));
             NamesrvProbe javaProbe = NamesrvProbe.connect(javaNamesrv.address());
             JavaBroker java = JavaBroker.start(Versions.JAVA_5, dir.resolve("java-broker"), javaNamesrv.address(), "JavaSqlCluster",
                 "java-sql-a", Map.of("enablePropertyFilter", "true"));
             BrokerProbe javaBrokerProbe = BrokerProbe.connect(java.address(), "java-sql-a")) {
            Await.until("the Java broker takes a topic", ROUTE_TIMEOUT, () -> {
                javaBrokerProbe.createTopic("SqlTopicJava", 4);
                return true;
            }, ok -> ok, () -> java.describe(40));
            Await.until("route of SqlTopicJava", ROUTE_TIMEOUT, () -> javaProbe.route("SqlTopicJava"),
                (TopicRouteData r) -> r != null && !r.getQueueDatas().isEmpty(), () -> java.describe(40));
            DriverRun run = drive(Versions.JAVA_49, "JSON", dir.resolve("sql-java"), javaNamesrv.address(), "SqlTopicJava");
            run.assertOk("sqlFilter");
            run.assertOk("sqlRefused");
        }
    }
}
