package rocketmq.compat.broker;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.time.Duration;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import org.junit.jupiter.api.extension.ExtendWith;
import org.junit.jupiter.api.io.TempDir;
import rocketmq.compat.client.DriverRun;
import rocketmq.compat.harness.Await;
import rocketmq.compat.harness.DumpLogsOnFailure;
import rocketmq.compat.harness.FreePorts;
import rocketmq.compat.mqadmin.MqAdmin;
import rocketmq.compat.mqadmin.MqAdminRun;
import rocketmq.compat.namesrv.NameServer;
import rocketmq.compat.namesrv.NamesrvProbe;
import rocketmq.compat.runtime.Versions;

/**
 * ACL 1.0 ({@code aclEnable=true}, {@code conf/plain_acl.yml}) on our broker, driven by the Java 4.9.7 client's
 * {@code AclClientRPCHook} and by mqadmin 4.9.7 with {@code conf/tools.yml}: the right credentials work; a wrong
 * secret, no credentials, a topic the account may not publish to and an admin command from a non-admin account are
 * refused with code 1 and the AclException text of a 4.9.7 broker; an admin command from a white address with a wrong
 * secret is refused too (unlike 4.9.7); a rewritten plain_acl.yml takes effect while the broker runs.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
@ExtendWith(DumpLogsOnFailure.class)
class RustBrokerAclTest {
    private static final String CLUSTER = "AclCluster";
    private static final String BROKER = "broker-acl";
    private static final String USER = "RocketMQUser";
    private static final String USER_SECRET = "12345678";
    private static final String ADMIN = "RocketMQAdmin";
    private static final String ADMIN_SECRET = "87654321";
    private static final String ACL = """
        globalWhiteRemoteAddresses:
        accounts:
          - accessKey: RocketMQUser
            secretKey: 12345678
            whiteRemoteAddress:
            admin: false
            defaultTopicPerm: DENY
            defaultGroupPerm: SUB
            topicPerms:
              - AclTopic=PUB|SUB
              - GrpcAclTopic=PUB|SUB
              - OtherTopic=%s
          - accessKey: RocketMQAdmin
            secretKey: 87654321
            admin: true
          - accessKey: WhiteUser
            secretKey: 33334444
            whiteRemoteAddress: 127.0.0.1
            admin: false
        """;

    @TempDir
    static Path dir;
    private NameServer namesrv;
    private RustBroker broker;
    private NamesrvProbe probe;
    private int grpcPort;

    @BeforeAll
    void start() throws Exception {
        Path brokerDir = dir.resolve("broker");
        Files.createDirectories(brokerDir.resolve("conf"));
        Files.writeString(brokerDir.resolve("conf/plain_acl.yml"), ACL.formatted("SUB"));
        namesrv = NameServer.start(dir.resolve("namesrv"));
        // With the gRPC front too: 5.x gRPC clients sign as the same accounts.
        grpcPort = FreePorts.one();
        Path proxyConf = dir.resolve("rmq-proxy.json");
        Files.writeString(proxyConf, "{\"grpcServerPort\": " + grpcPort + ", \"remotingListenPort\": " + FreePorts.one() + "}");
        broker = RustBroker.start(brokerDir, namesrv.address(), CLUSTER, BROKER, Map.of("aclEnable", "true"),
            List.of("--enable-proxy", "-pc", proxyConf.toString()));
        probe = NamesrvProbe.connect(namesrv.address());
        Await.until("our broker " + BROKER + " registered", Duration.ofSeconds(30), probe::clusterInfo,
            info -> info.getBrokerAddrTable() != null && info.getBrokerAddrTable().containsKey(BROKER), () -> broker.describe(40));
    }

    @AfterAll
    void stop() throws Exception {
        for (AutoCloseable c : new AutoCloseable[] {probe, broker, namesrv}) {
            if (c != null) {
                c.close();
            }
        }
    }

    private MqAdmin mqadmin(String name, String accessKey, String secretKey) throws Exception {
        Path home = dir.resolve(name);
        Files.createDirectories(home.resolve("conf"));
        Files.writeString(home.resolve("conf/tools.yml"), "accessKey: " + accessKey + "\nsecretKey: " + secretKey + "\n");
        return new MqAdmin(Versions.JAVA_49, "JSON", namesrv.address(), home);
    }

    private DriverRun client(String tag, String accessKey, String secretKey, String step) {
        return DriverRun.run("AclDriver", "rocketmq-tools", Versions.JAVA_49, "JSON", dir.resolve("drivers").resolve(tag),
            namesrv.address(), accessKey, secretKey, step);
    }

    private static String line(DriverRun run, String prefix) {
        return run.lines(prefix).stream().map(w -> String.join(" ", w)).findFirst()
            .orElseThrow(() -> new AssertionError("no " + prefix + " line\n" + run.report()));
    }

    @Test
    void credentialsPermissionsAndAdminCodesAreCheckedAsJavaChecksThem() throws Exception {
        // The admin account creates the topics; the user account may not.
        MqAdmin admin = mqadmin("mqadmin-admin", ADMIN, ADMIN_SECRET);
        for (String topic : new String[] {"AclTopic", "OtherTopic"}) {
            MqAdminRun created = admin.run("updateTopic", "-c", CLUSTER, "-t", topic);
            assertTrue(created.succeeded() && created.stdout().contains("create topic to " + broker.address() + " success"),
                created.describe());
        }
        MqAdminRun refused = mqadmin("mqadmin-user", USER, USER_SECRET).run("updateTopic", "-b", broker.address(), "-t", "UserTopic");
        String all = refused.stdout() + refused.stderr();
        assertTrue(all.contains("CODE: 1") && all.contains("org.apache.rocketmq.acl.common.AclException: Need admin permission for request code=17, but accessKey="
            + USER + " is not"), refused.describe());

        // The right credentials publish and subscribe.
        DriverRun sent = client("send-ok", USER, USER_SECRET, "send:AclTopic:10");
        assertEquals("10", line(sent, "SENT "), sent.summary());
        DriverRun consumed = client("consume-ok", USER, USER_SECRET, "consume:AclTopic:AclGroup:10:60");
        assertEquals("10", line(consumed, "CONSUMED "), consumed.summary());
        // The 5.3.3 client's hook signs the same way.
        DriverRun five = DriverRun.run("AclDriver", "rocketmq-tools", Versions.JAVA_5, "ROCKETMQ", dir.resolve("drivers").resolve("send-5"),
            namesrv.address(), USER, USER_SECRET, "send:AclTopic:3");
        assertEquals("3", line(five, "SENT "), five.summary());
        DriverRun fiveRefused = DriverRun.run("AclDriver", "rocketmq-tools", Versions.JAVA_5, "ROCKETMQ",
            dir.resolve("drivers").resolve("send-5-bad"), namesrv.address(), USER, "not-the-secret", "send:AclTopic:1");
        assertTrue(line(fiveRefused, "SEND_FAILED ").contains("Check signature failed for accessKey=" + USER), fiveRefused.summary());

        // A wrong secret, no credentials, a topic without PUB.
        assertTrue(line(client("send-bad-secret", USER, "not-the-secret", "send:AclTopic:1"), "SEND_FAILED ")
            .contains("CODE: 1  DESC: org.apache.rocketmq.acl.common.AclException: Check signature failed for accessKey=" + USER));
        assertTrue(line(client("send-anonymous", "-", "-", "send:AclTopic:1"), "SEND_FAILED ")
            .contains("org.apache.rocketmq.acl.common.AclException: No accessKey is configured"));
        assertTrue(line(client("send-unknown", "NoSuchAccount", "12345678", "send:AclTopic:1"), "SEND_FAILED ")
            .contains("No acl config for NoSuchAccount"));
        assertTrue(line(client("send-sub-only", USER, USER_SECRET, "send:OtherTopic:1"), "SEND_FAILED ")
            .contains("No default permission for topic:OtherTopic"));

        // plain_acl.yml rewritten while the broker runs: OtherTopic becomes PUB for the user.
        Files.writeString(dir.resolve("broker/conf/plain_acl.yml"), ACL.formatted("PUB"));
        Await.until("the rewritten plain_acl.yml lets the user publish to OtherTopic", Duration.ofSeconds(30),
            () -> client("send-reloaded-" + System.nanoTime(), USER, USER_SECRET, "send:OtherTopic:1"),
            run -> run.lines("SENT ").stream().anyMatch(w -> w[0].equals("1")), () -> broker.describe(40));

        // The ACL admin codes through mqadmin 4.9.7: a new account, the white list, the versions, the config, delete.
        MqAdminRun update = admin.run("updateAclConfig", "-b", broker.address(), "-a", "NewUser01", "-s", "11112222",
            "-t", "AclTopic=PUB", "-i", "DENY", "-u", "SUB", "-m", "false");
        assertTrue(update.succeeded() && update.stdout().contains("create or update plain access config to " + broker.address() + " success"),
            update.describe());
        assertEquals("2", line(client("send-new-user", "NewUser01", "11112222", "send:AclTopic:2"), "SENT "));
        MqAdminRun userUpdate = mqadmin("mqadmin-user", USER, USER_SECRET).run("updateAclConfig", "-b", broker.address(),
            "-a", "Sneaky01", "-s", "11112222", "-m", "true");
        assertTrue((userUpdate.stdout() + userUpdate.stderr()).contains("Need admin permission for request code=50"), userUpdate.describe());
        MqAdminRun config = admin.run("getAclConfig", "-b", broker.address());
        assertTrue(config.succeeded() && config.stdout().contains("NewUser01") && config.stdout().contains("AclTopic=PUB")
            && !config.stdout().contains("Sneaky01"), config.describe());
        // A white address lets an account's ordinary requests through unsigned, not the admin codes: these need an
        // admin's signature (ours; 4.9.7 would hand every secret key to this wrong secret).
        MqAdmin whiteWrongSecret = mqadmin("mqadmin-white", "WhiteUser", "not-the-secret");
        MqAdminRun whiteConfig = whiteWrongSecret.run("getAclConfig", "-b", broker.address());
        String whiteAll = whiteConfig.stdout() + whiteConfig.stderr();
        assertTrue(whiteAll.contains("Check signature failed for accessKey=WhiteUser") && !whiteAll.contains(ADMIN_SECRET), whiteConfig.describe());
        MqAdminRun whiteUpdate = whiteWrongSecret.run("updateAclConfig", "-b", broker.address(), "-a", "Intruder01", "-s", "11112222", "-m", "true");
        assertTrue((whiteUpdate.stdout() + whiteUpdate.stderr()).contains("Check signature failed for accessKey=WhiteUser"), whiteUpdate.describe());
        assertTrue(!Files.readString(dir.resolve("broker/conf/plain_acl.yml")).contains("Intruder01"));
        MqAdminRun white = admin.run("updateGlobalWhiteAddr", "-b", broker.address(), "-g", "10.99.99.*");
        assertTrue(white.succeeded() && white.stdout().contains("update global white remote addresses to " + broker.address() + " success"),
            white.describe());
        assertTrue(Files.readString(dir.resolve("broker/conf/plain_acl.yml")).contains("10.99.99.*"));
        MqAdminRun versions = admin.run("clusterAclConfigVersion", "-c", CLUSTER);
        assertTrue(versions.succeeded() && versions.stdout().contains(BROKER) && versions.stdout().contains(broker.address()), versions.describe());
        MqAdminRun delete = admin.run("deleteAccessConfig", "-b", broker.address(), "-a", "NewUser01");
        assertTrue(delete.succeeded() && delete.stdout().contains("delete plain access config account from " + broker.address() + " success"),
            delete.describe());
        assertTrue(line(client("send-deleted-user", "NewUser01", "11112222", "send:AclTopic:1"), "SEND_FAILED ").contains("No acl config for NewUser01"));

        // A file that does not load leaves the last good config in force.
        Files.writeString(dir.resolve("broker/conf/plain_acl.yml"), "accounts: [\n");
        Await.until("the broker reports the file that does not load", Duration.ofSeconds(30),
            () -> broker.output().contains("ACL files changed but do not load; the last good config stays"), () -> broker.describe(40));
        assertTrue(broker.isAlive(), broker.describe(40));
        assertEquals("1", line(client("send-after-bad-file", USER, USER_SECRET, "send:OtherTopic:1"), "SENT "));
    }

    /** The gRPC front (`--enable-proxy`): rocketmq-client-java 5.x signs with an account of plain_acl.yml. */
    @Test
    void grpcClientsSignAsTheirAccount() throws Exception {
        MqAdminRun created = mqadmin("mqadmin-admin-grpc", ADMIN, ADMIN_SECRET).run("updateTopic", "-c", CLUSTER, "-t", "GrpcAclTopic");
        assertTrue(created.succeeded(), created.describe());
        Duration timeout = Duration.ofSeconds(120);
        DriverRun ok = DriverRun.start("GrpcDriver", "rocketmq-client-java", Versions.CLIENT_JAVA, "JSON", dir.resolve("grpc-ok"),
            USER + ":" + USER_SECRET + "@127.0.0.1:" + grpcPort, "normal:GrpcAclTopic:grpc-acl:5").await(timeout);
        System.out.println("gRPC client with the account's keys: " + ok.summary());
        assertEquals("OK", ok.result("normal").get("status"), ok.report() + "\n" + broker.describe(60));
        DriverRun bad = DriverRun.start("GrpcDriver", "rocketmq-client-java", Versions.CLIENT_JAVA, "JSON", dir.resolve("grpc-bad"),
            USER + ":not-the-secret@127.0.0.1:" + grpcPort, "normal:GrpcAclTopic:grpc-acl-bad:1").await(timeout);
        System.out.println("gRPC client with a wrong secret: " + bad.summary());
        assertEquals("FAILED", bad.result("normal").get("status"), bad.report());
        assertTrue(bad.report().contains("Check signature failed for accessKey=" + USER), bad.report());
    }
}
