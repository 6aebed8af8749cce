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
import java.util.Set;
import java.util.TreeSet;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import rocketmq.compat.broker.BrokerProbe;
import rocketmq.compat.broker.RustBroker;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.ChildProcess;
import rocketmq.compat.harness.JavaCommand;
import rocketmq.compat.runtime.CompatDirs;
import rocketmq.compat.runtime.RocketmqHome;
import rocketmq.compat.runtime.RuntimeClasspath;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * {@code mqadmin updateBrokerConfig} (4.9.7 and 5.3.3) against our broker: a key takes effect (getBrokerConfig shows
 * it, for brokerPermission the route does, for maxMessageSize the next send does), is written to the broker.conf the
 * broker was started with and is still there after a restart; a path key and Java 5.3.3's black list are refused with
 * NO_PERMISSION and change nothing.
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

        // A path key and Java 5.3.3's black list are refused with Java's code, and change nothing.
        for (String[] kv : List.of(new String[] {"4", "storePathRootDir", "/tmp/elsewhere"}, new String[] {"5", "rocketmqHome", "/tmp/x"},
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

    /**
     * Keys of Java 5.3.3's BrokerConfig and MessageStoreConfig that its updateBrokerConfig takes (each has a setter of a
     * simple type and is not on the black list): ours takes them too and getBrokerConfig shows them at once, whether the
     * running broker follows them at once or from its next start. A lower maxMessageSize refuses a bigger message at once.
     */
    @Test
    void everyKeyJavaTakesIsTakenAndMaxMessageSizeIsFollowedAtOnce() throws Exception {
        MqAdmin five = new MqAdmin(Versions.JAVA_5, "ROCKETMQ", namesrv.address(), dir.resolve("mqadmin-5-keys"));
        Map<String, String> keys = new LinkedHashMap<>();
        keys.put("flushIntervalCommitLog", "400");
        keys.put("accessMessageInMemoryMaxRatio", "35");
        keys.put("maxTransferCountOnMessageInMemory", "16");
        keys.put("shortPollingTimeMills", "900");
        keys.put("waitTimeMillsInSendQueue", "300");
        keys.put("sendMessageThreadPoolNums", "2");
        keys.put("defaultTopicQueueNums", "6");
        for (Map.Entry<String, String> kv : keys.entrySet()) {
            MqAdminRun run = five.run("updateBrokerConfig", "-b", broker.address(), "-k", kv.getKey(), "-v", kv.getValue());
            assertTrue(run.succeeded() && run.stdout().contains("update broker config success"), run.describe());
        }
        Map<String, String> config = brokerConfig(five);
        for (Map.Entry<String, String> kv : keys.entrySet()) {
            assertEquals(kv.getValue(), config.get(kv.getKey()), kv.getKey());
        }

        byte[] body = new byte[2048];
        try (BrokerProbe probe = BrokerProbe.connect(broker.address(), BROKER)) {
            assertEquals(0, probe.send("MaxSizeTopic", body).getCode(), "a 2 KiB message before");
            MqAdminRun lower = five.run("updateBrokerConfig", "-b", broker.address(), "-k", "maxMessageSize", "-v", "1024");
            assertTrue(lower.succeeded() && lower.stdout().contains("update broker config success"), lower.describe());
            org.apache.rocketmq.remoting.protocol.RemotingCommand refused = probe.send("MaxSizeTopic", body);
            assertEquals(13, refused.getCode(), "MESSAGE_ILLEGAL for a 2 KiB message above maxMessageSize 1024: " + refused.getRemark());
            assertEquals(0, probe.send("MaxSizeTopic", new byte[512]).getCode(), "a 512 B message");
            MqAdminRun back = five.run("updateBrokerConfig", "-b", broker.address(), "-k", "maxMessageSize", "-v", "4194304");
            assertTrue(back.succeeded(), back.describe());
            assertEquals(0, probe.send("MaxSizeTopic", body).getCode(), "a 2 KiB message after");
        }
    }

    /**
     * Keys Java 5.3.3's {@code mqbroker -p} prints that ours does not: its black list (refused by updateBrokerConfig,
     * so never set at runtime) and the fields Java prints under their field name while its setter takes another name
     * ({@code isScanAvailableNameSrv}: no broker.conf line sets it under the printed name).
     */
    private static final Set<String> NOT_KEYS_OF_OURS = Set.of("configBlackList", "brokerConfigPath", "isScanAvailableNameSrv");

    /**
     * Every key Java 5.3.3's broker prints with {@code -p} (its BrokerConfig, Netty configs, MessageStoreConfig: what its
     * updateBrokerConfig sets) is printed by ours with the same broker.conf, so each is taken, shown and persisted; and
     * where ours prints a key of Java's it prints Java's default unless broker.conf sets it.
     */
    @Test
    void everyKeyJava5PrintsIsAKeyOfOurs() {
        Path conf = broker.storeDir().getParent().resolve("broker.conf");
        Map<String, String> java = printed("Java 5.3.3 mqbroker -p", RocketmqHome.create(dir.resolve("java-p-home")).applyTo(
            JavaCommand.main("org.apache.rocketmq.broker.BrokerStartup", RuntimeClasspath.of("rocketmq-broker", Versions.JAVA_5))
                .heapMb(128, 256).shortLived().args("-c", conf.toString(), "-p")).toList(), "java-p");
        Map<String, String> ours = printed("our mqbroker -p",
            List.of(CompatDirs.binDir().resolve("mqbroker").toString(), "-c", conf.toString(), "-p"), "our-p");
        Set<String> missing = new TreeSet<>(java.keySet());
        missing.removeAll(ours.keySet());
        missing.removeAll(NOT_KEYS_OF_OURS);
        assertEquals(Set.of(), missing, "keys Java 5.3.3 prints and ours does not");
        assertTrue(java.size() > 300, "Java printed " + java.size() + " keys");
    }

    private Map<String, String> printed(String name, List<String> command, String out) {
        ChildProcess child = ChildProcess.builder(name).command(command).directory(dir)
            .output(dir.resolve(out + ".out"), dir.resolve(out + ".err")).start();
        assertEquals(0, child.awaitExit(Duration.ofSeconds(60)), child.describe(40));
        Map<String, String> config = new LinkedHashMap<>();
        for (String printed : child.stdout().split("\n")) {
            // Java prints through its console logger: "<date> <time> INFO main - key=value".
            int dash = printed.indexOf(" - ");
            String line = printed.contains(" INFO main - ") ? printed.substring(dash + 3) : printed;
            int eq = line.indexOf('=');
            if (eq > 0 && line.substring(0, eq).matches("[A-Za-z0-9_]+")) {
                config.put(line.substring(0, eq), line.substring(eq + 1).strip());
            }
        }
        return config;
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
