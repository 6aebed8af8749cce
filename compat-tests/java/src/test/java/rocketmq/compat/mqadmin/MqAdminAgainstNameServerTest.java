package rocketmq.compat.mqadmin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.apache.rocketmq.common.protocol.route.QueueData;
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
import rocketmq.compat.broker.JavaBroker;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * The official mqadmin of both lines (4.9.x with JSON headers, 5.x with ROCKETMQ headers) against the
 * name server, with one Java broker registered. mqadmin exits 0 even when a command fails, so every
 * check reads what it printed; effects are double-checked in-process through {@link NamesrvProbe}.
 */
@DisplayName("mqadmin 4.9.x and 5.x against the name server")
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@TestMethodOrder(MethodOrderer.OrderAnnotation.class)
@ExtendWith(DumpLogsOnFailure.class)
class MqAdminAgainstNameServerTest {
    private static final String CLUSTER = "AdminCluster";
    private static final String BROKER = "admin-broker";
    private static final String DEFAULT_TOPIC = "TBW102";
    private static final Pattern CONFIG_LINE = Pattern.compile("^(\\S+)\\s+=  (.*)$");

    @TempDir
    static Path dir;
    private NameServer namesrv;
    private JavaBroker broker;
    private NamesrvProbe probe;
    private EachTools eachTools;

    @BeforeAll
    void startNameServerAndBroker() {
        namesrv = NameServer.start(dir.resolve("namesrv"));
        broker = JavaBroker.start(Versions.JAVA_49, dir.resolve("broker"), namesrv.address(), CLUSTER, BROKER);
        probe = NamesrvProbe.connect(namesrv.address());
        Await.until("broker " + BROKER + " registered", Duration.ofSeconds(60), probe::clusterInfo,
            info -> info.getBrokerAddrTable() != null && info.getBrokerAddrTable().containsKey(BROKER),
            () -> namesrv.describe(40) + "\n" + broker.describe(40));
        // A Java broker fails GET_BROKER_RUNTIME_INFO (NoSuchElementException in StoreStatsService) until its
        // stats service took its first sample, about a second after start; clusterList needs that answer.
        try (BrokerProbe brokerProbe = BrokerProbe.connect(broker.address(), BROKER)) {
            Await.until("broker " + BROKER + " answers GET_BROKER_RUNTIME_INFO", Duration.ofSeconds(30), () -> {
                try {
                    return brokerProbe.runtimeInfo().containsKey("putTps");
                } catch (Exception e) {
                    return false;
                }
            }, () -> broker.describe(40));
        }
        eachTools = new EachTools(List.of(
            new MqAdmin(Versions.JAVA_49, "JSON", namesrv.address(), dir.resolve("mqadmin-49")),
            new MqAdmin(Versions.JAVA_5, "ROCKETMQ", namesrv.address(), dir.resolve("mqadmin-5"))));
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

    @Test
    @Order(1)
    void clusterListShowsTheClusterTheBrokerNameAndItsAddress() {
        eachTools.concurrently("clusterList", mqadmin -> {
            MqAdminRun run = mqadmin.run("clusterList");
            assertSucceeded(run);
            assertTrue(run.stdoutLines().get(0).startsWith("#Cluster Name"), "header line" + run.describe());
            assertTrue(run.stdoutLines().stream().anyMatch(line -> {
                String[] cols = line.trim().split("\\s+");
                return cols.length > 4 && cols[0].equals(CLUSTER) && cols[1].equals(BROKER) && cols[2].equals("0")
                    && cols[3].equals(broker.address());
            }), "a line '" + CLUSTER + " " + BROKER + " 0 " + broker.address() + " ...'" + run.describe());
        });
    }

    @Test
    @Order(2)
    void topicRoutePrintsTheDefaultTopicsRouteAsJsonWithTheBrokerAddress() {
        eachTools.concurrently("topicRoute", mqadmin -> {
            MqAdminRun run = mqadmin.run("topicRoute", "-t", DEFAULT_TOPIC);
            assertSucceeded(run);
            String out = compact(run.stdout());
            for (String expected : List.of("\"brokerName\":\"" + BROKER + "\"", "\"cluster\":\"" + CLUSTER + "\"",
                "{0:\"" + broker.address() + "\"}", "\"perm\":7", "\"readQueueNums\":8", "\"writeQueueNums\":8")) {
                assertTrue(out.contains(expected), "route JSON should contain " + expected + run.describe());
            }
        });
    }

    @Test
    @Order(3)
    void topicRouteOfAnUnknownTopicFailsWithTopicNotExist() {
        eachTools.concurrently("topicRoute of an unknown topic", mqadmin -> {
            String topic = "NoSuchTopic_" + mqadmin.version().replace('.', '_');
            MqAdminRun run = mqadmin.run("topicRoute", "-t", topic);
            assertTrue(run.stderr().contains("TopicRouteSubCommand command failed"), "failure" + run.describe());
            assertTrue(run.stderr().contains("CODE: 17  DESC: No topic route info in name server for the topic: " + topic),
                "response code 17 with Java's remark" + run.describe());
        });
    }

    @Test
    @Order(4)
    void topicListListsTheDefaultTopicAndTheTopicsNamedAfterTheClusterAndTheBroker() {
        eachTools.concurrently("topicList", mqadmin -> {
            MqAdminRun plain = mqadmin.run("topicList");
            assertSucceeded(plain);
            List<String> topics = plain.stdoutLines().stream().map(String::trim).toList();
            for (String topic : List.of(DEFAULT_TOPIC, CLUSTER, BROKER)) {
                assertTrue(topics.contains(topic), "topic " + topic + " listed" + plain.describe());
            }

            MqAdminRun withClusters = mqadmin.run("topicList", "-c");
            assertSucceeded(withClusters);
            assertTrue(withClusters.stdoutLines().get(0).startsWith("#Cluster Name"), "header" + withClusters.describe());
            assertTrue(withClusters.stdoutLines().stream().map(l -> l.trim().split("\\s+"))
                    .anyMatch(cols -> cols.length >= 2 && cols[0].equals(CLUSTER) && cols[1].equals(DEFAULT_TOPIC)),
                "a line '" + CLUSTER + " " + DEFAULT_TOPIC + "'" + withClusters.describe());
        });
    }

    @Test
    @Order(5)
    void updateTopicOnTheClusterMakesTheNewTopicRoutable() {
        eachTools.concurrently("updateTopic -c", mqadmin -> {
            String topic = "AdminTopic_" + mqadmin.version().replace('.', '_');
            MqAdminRun create = mqadmin.run("updateTopic", "-c", CLUSTER, "-t", topic);
            assertSucceeded(create);
            assertTrue(create.stdout().contains("create topic to " + broker.address() + " success."), create.describe());
            // the broker registers the new topic with the name server right away
            Await.until("route of " + topic, Duration.ofSeconds(10), () -> probe.route(topic), r -> true,
                () -> create.describe() + "\n" + namesrv.describe(20));

            MqAdminRun route = mqadmin.run("topicRoute", "-t", topic);
            assertSucceeded(route);
            String out = compact(route.stdout());
            assertTrue(out.contains("{0:\"" + broker.address() + "\"}") && out.contains("\"perm\":6"), route.describe());
        });
    }

    @Test
    @Order(6)
    void updateKvConfigStoresTheValueAndDeleteKvConfigRemovesIt() {
        eachTools.concurrently("updateKvConfig / deleteKvConfig", mqadmin -> {
            String namespace = "CompatNamespace";
            String key = "key_" + mqadmin.version().replace('.', '_');
            String value = "value-of-" + key;
            MqAdminRun update = mqadmin.run("updateKvConfig", "-s", namespace, "-k", key, "-v", value);
            assertSucceeded(update);
            assertEquals(List.of("create or update kv config to namespace success."), update.stdoutLines(), update.describe());
            assertEquals(value, probe.kvConfig(namespace, key), "GET_KV_CONFIG after updateKvConfig");
            String persisted = Files.readString(namesrv.kvConfigPath());
            assertTrue(persisted.contains("\"" + key + "\":\"" + value + "\""), "kvConfigPath file holds the pair: " + persisted);

            MqAdminRun delete = mqadmin.run("deleteKvConfig", "-s", namespace, "-k", key);
            assertSucceeded(delete);
            assertEquals(List.of("delete kv config from namespace success."), delete.stdoutLines(), delete.describe());
            Exception missing = assertThrows(Exception.class, () -> probe.kvConfig(namespace, key),
                "GET_KV_CONFIG after deleteKvConfig must fail");
            assertEquals(22, NamesrvProbe.responseCode(missing), "QUERY_NOT_FOUND expected, got " + missing);
            assertFalse(Files.readString(namesrv.kvConfigPath()).contains(key), "key removed from the kvConfigPath file");
        });
    }

    @Test
    @Order(7)
    void getNamesrvConfigPrintsTheNameServersConfiguration() {
        eachTools.concurrently("getNamesrvConfig", mqadmin -> {
            MqAdminRun run = mqadmin.run("getNamesrvConfig");
            assertSucceeded(run);
            assertEquals("============" + namesrv.address() + "============", run.stdoutLines().get(0), run.describe());
            Map<String, String> config = parseConfig(run);
            assertEquals(namesrv.kvConfigPath().toString(), config.get("kvConfigPath"), run.describe());
            assertEquals(namesrv.address().split(":")[1], config.get("listenPort"), run.describe());
            assertEquals("127.0.0.1", config.get("bindAddress"), run.describe());
            assertEquals("false", config.get("orderMessageEnable"), run.describe());
            assertEquals(namesrv.kvConfigPath().getParent().toString(), config.get("rocketmqHome"), run.describe());
        });
    }

    @Test
    @Order(8)
    void updateNamesrvConfigChangesAValueThatGetNamesrvConfigThenShows() {
        eachTools.inTurn("updateNamesrvConfig orderMessageEnable", mqadmin -> {
            MqAdminRun update = mqadmin.run("updateNamesrvConfig", "-k", "orderMessageEnable", "-v", "true");
            assertSucceeded(update);
            assertEquals(List.of("update name server config success![" + namesrv.address() + "]", "orderMessageEnable : true"),
                update.stdoutLines(), update.describe());
            MqAdminRun get = mqadmin.run("getNamesrvConfig");
            assertEquals("true", parseConfig(get).get("orderMessageEnable"), get.describe());
            assertTrue(persistedConfigText().contains("orderMessageEnable=true"),
                "the change is persisted: " + persistedConfigText());

            probe.updateConfig("orderMessageEnable", "false");
            assertEquals("false", probe.config().getProperty("orderMessageEnable"), "GET_NAMESRV_CONFIG after reset");
        });
    }

    @Test
    @Order(9)
    void updateNamesrvConfigRefusesToChangeThePathsOfItsFiles() {
        eachTools.concurrently("updateNamesrvConfig of a path", mqadmin -> {
            Path evil = dir.resolve("evil-" + mqadmin.version());
            for (String key : List.of("kvConfigPath", "configStorePath")) {
                MqAdminRun run = mqadmin.run("updateNamesrvConfig", "-k", key, "-v", evil.toString());
                assertFalse(run.stdout().contains("success"), "must not report success" + run.describe());
                assertTrue(run.stderr().contains("UpdateNamesrvConfigCommand command failed"), run.describe());
                // 5.x name server: "Can not update config in black list."; 4.9: "Can not update config path"
                assertTrue(run.stderr().contains("CODE: 16  DESC: Can not update config in black list.")
                        || run.stderr().contains("CODE: 16  DESC: Can not update config path"),
                    "NO_PERMISSION with a remark of Java's" + run.describe());
            }
            assertEquals(namesrv.kvConfigPath().toString(), probe.config().getProperty("kvConfigPath"));
            assertFalse(Files.exists(evil), "nothing written to " + evil);
        });
    }

    /**
     * Java's name server clears only the write bit on wipe, but sets the perm to exactly read|write (6) on
     * add, so a topic that had the inherit bit (TBW102: 7) comes back as 6.
     */
    @Test
    @Order(10)
    void wipeWritePermTakesTheWriteBitAwayAndAddWritePermSetsReadWrite() {
        eachTools.inTurn("wipeWritePerm / addWritePerm", mqadmin -> {
            int before = defaultTopicPerm();
            assertTrue((before & 2) != 0, "TBW102 writable before wipeWritePerm, perm " + before);

            MqAdminRun wipe = mqadmin.run("wipeWritePerm", "-b", BROKER);
            assertSucceeded(wipe);
            assertTopicCount("wipe", wipe);
            assertEquals(before & ~2, defaultTopicPerm(), "TBW102 perm after wipeWritePerm (" + before + " without the write bit 2)");
            MqAdminRun routeAfterWipe = mqadmin.run("topicRoute", "-t", DEFAULT_TOPIC);
            assertTrue(compact(routeAfterWipe.stdout()).contains("\"perm\":" + (before & ~2)), routeAfterWipe.describe());

            MqAdminRun add = mqadmin.run("addWritePerm", "-b", BROKER);
            assertSucceeded(add);
            assertTopicCount("add", add);
            assertEquals(6, defaultTopicPerm(), "TBW102 perm after addWritePerm (read|write)");
            MqAdminRun routeAfterAdd = mqadmin.run("topicRoute", "-t", DEFAULT_TOPIC);
            assertTrue(compact(routeAfterAdd.stdout()).contains("\"perm\":6"), routeAfterAdd.describe());
        });
    }

    /** "wipe|add write perm of broker[B] in name server[NS] OK, N" with N &gt; 0 topics changed. */
    private void assertTopicCount(String verb, MqAdminRun run) {
        Pattern line = Pattern.compile(Pattern.quote(verb + " write perm of broker[" + BROKER + "] in name server["
            + namesrv.address() + "] OK, ") + "(\\d+)");
        Matcher m = line.matcher(run.stdout());
        assertTrue(m.find() && Integer.parseInt(m.group(1)) > 0, verb + " topic count > 0" + run.describe());
    }

    private int defaultTopicPerm() throws Exception {
        return probe.route(DEFAULT_TOPIC).getQueueDatas().stream()
            .filter(q -> q.getBrokerName().equals(BROKER)).findFirst().map(QueueData::getPerm).orElse(-1);
    }

    /** The config file the name server persists updates to: configStorePath, or (Java) its -c file. */
    private String persistedConfigText() throws Exception {
        Path store = namesrv.kvConfigPath().resolveSibling("namesrv.properties");
        String stored = Files.exists(store) ? Files.readString(store) : "";
        return stored + "\n" + Files.readString(namesrv.configFile());
    }

    private static Map<String, String> parseConfig(MqAdminRun run) {
        Map<String, String> config = new LinkedHashMap<>();
        for (String line : run.stdoutLines()) {
            Matcher m = CONFIG_LINE.matcher(line);
            if (m.matches()) {
                config.put(m.group(1), m.group(2));
            }
        }
        assertFalse(config.isEmpty(), "no 'key   =  value' lines" + run.describe());
        return config;
    }

    /** The route JSON without whitespace (mqadmin pretty-prints it with tabs and newlines). */
    private static String compact(String json) {
        return json.replaceAll("\\s+", "");
    }

    private static void assertSucceeded(MqAdminRun run) {
        assertTrue(run.succeeded(), "mqadmin failed" + run.describe());
    }
}
