package rocketmq.compat.mqadmin;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import rocketmq.compat.broker.RustBroker;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * {@code mqadmin updateBrokerConfig} (4.9.7 and 5.3.3) against our broker: an allowed key takes effect at once
 * (getBrokerConfig shows it, and for brokerPermission the route does), is written to the broker.conf the broker was
 * started with and is still there after a restart; a path key is refused with NO_PERMISSION and changes nothing.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class MqAdminUpdateBrokerConfigTest {
    private static final String CLUSTER = "UpdateCluster";
    private static final String BROKER = "broker-update";
    private static final Pattern CONFIG_LINE = Pattern.compile("^(\\S+)\\s+=(?:  (.*))?$");

    @TempDir
    static Path dir;
    private NameServer namesrv;
    private RustBroker broker;
    private NamesrvProbe probe;

    @BeforeAll
    void start() {
        namesrv = NameServer.start(dir.resolve("namesrv"));
        broker = RustBroker.start(dir.resolve("broker"), namesrv.address(), CLUSTER, BROKER);
        probe = NamesrvProbe.connect(namesrv.address());
        awaitRegistered();
    }

    @AfterAll
    void stop() throws Exception {
        for (AutoCloseable c : new AutoCloseable[] {probe, broker, namesrv}) {
            if (c != null) {
                c.close();
            }
        }
    }

    @Test
    void allowedKeysTakeEffectAndSurviveARestartAndPathKeysAreRefused() throws Exception {
        MqAdmin four = new MqAdmin(Versions.JAVA_49, "JSON", namesrv.address(), dir.resolve("mqadmin-49"));
        MqAdmin five = new MqAdmin(Versions.JAVA_5, "ROCKETMQ", namesrv.address(), dir.resolve("mqadmin-5"));

        // 4.9.7 by broker address, 5.3.3 by cluster name: each sets its own key.
        MqAdminRun byAddr = four.run("updateBrokerConfig", "-b", broker.address(), "-k", "fileReservedTime", "-v", "10");
        assertTrue(byAddr.succeeded() && byAddr.stdout().contains("update broker config success, " + broker.address()),
            byAddr.describe());
        MqAdminRun byCluster = five.run("updateBrokerConfig", "-c", CLUSTER, "-k", "slaveReadEnable", "-v", "true");
        assertTrue(byCluster.succeeded() && byCluster.stdout().contains("update broker config success, " + broker.address()),
            byCluster.describe());
        for (MqAdmin tool : List.of(four, five)) {
            Map<String, String> config = brokerConfig(tool);
            assertEquals("10", config.get("fileReservedTime"), "fileReservedTime via " + tool.version());
            assertEquals("true", config.get("slaveReadEnable"), "slaveReadEnable via " + tool.version());
        }
        String persisted = Files.readString(broker.storeDir().getParent().resolve("broker.conf"));
        assertTrue(persisted.contains("fileReservedTime=10\n") && persisted.contains("slaveReadEnable=true\n"), persisted);

        // A path key, a port and the config path are refused with Java's code, and change nothing.
        for (String[] kv : List.of(new String[] {"4", "storePathRootDir", "/tmp/elsewhere"}, new String[] {"5", "listenPort", "1"},
            new String[] {"5", "brokerConfigPath", "/tmp/x.conf"})) {
            MqAdminRun refused = (kv[0].equals("4") ? four : five).run("updateBrokerConfig", "-b", broker.address(), "-k", kv[1], "-v", kv[2]);
            String all = refused.stdout() + refused.stderr();
            assertFalse(refused.stdout().contains("update broker config success"), refused.describe());
            assertTrue(all.contains("CODE: 16") && all.contains("cannot be changed at runtime"), refused.describe());
        }
        // A value of the wrong type: an error with its key named; the old value stays.
        MqAdminRun wrong = four.run("updateBrokerConfig", "-b", broker.address(), "-k", "fileReservedTime", "-v", "soon");
        assertTrue((wrong.stdout() + wrong.stderr()).contains("fileReservedTime"), wrong.describe());
        assertFalse(wrong.stdout().contains("update broker config success"), wrong.describe());
        assertEquals("10", brokerConfig(five).get("fileReservedTime"), "after a wrong value");
        assertEquals(broker.storeDir().toString(), brokerConfig(four).get("storePathRootDir"));

        // brokerPermission: the route shows the new permission at once (the broker registers again).
        MqAdminRun readOnly = five.run("updateBrokerConfig", "-b", broker.address(), "-k", "brokerPermission", "-v", "4");
        assertTrue(readOnly.succeeded(), readOnly.describe());
        Await.until("the cluster info of " + BROKER + " shows brokerPermission 4 in the route of TBW102",
            Duration.ofSeconds(20), () -> probe.route("TBW102"),
            route -> route != null && route.getQueueDatas().stream().anyMatch(q -> q.getBrokerName().equals(BROKER) && q.getPerm() == 4),
            () -> describeRoute("TBW102"));
        MqAdminRun writable = five.run("updateBrokerConfig", "-b", broker.address(), "-k", "brokerPermission", "-v", "6");
        assertTrue(writable.succeeded(), writable.describe());

        // After a restart from the rewritten broker.conf the values are still there.
        broker.terminate();
        broker.restart();
        awaitRegistered();
        Map<String, String> restarted = brokerConfig(four);
        assertEquals("10", restarted.get("fileReservedTime"), "after restart");
        assertEquals("true", restarted.get("slaveReadEnable"), "after restart");
        assertEquals("6", restarted.get("brokerPermission"), "after restart");
    }

    private Map<String, String> brokerConfig(MqAdmin tool) {
        MqAdminRun run = tool.run("getBrokerConfig", "-b", broker.address());
        assertTrue(run.succeeded(), run.describe());
        Map<String, String> values = new LinkedHashMap<>();
        for (String line : run.stdoutLines()) {
            Matcher m = CONFIG_LINE.matcher(line);
            if (m.matches()) {
                values.put(m.group(1), m.group(2) == null ? "" : m.group(2));
            }
        }
        assertFalse(values.isEmpty(), run.describe());
        return values;
    }

    private void awaitRegistered() {
        Await.until("our broker " + BROKER + " registered", Duration.ofSeconds(30), probe::clusterInfo,
            info -> info.getBrokerAddrTable() != null && info.getBrokerAddrTable().containsKey(BROKER),
            broker::toString);
    }

    private String describeRoute(String topic) {
        try {
            return String.valueOf(probe.route(topic));
        } catch (Exception e) {
            return "route of " + topic + ": " + e;
        }
    }
}
