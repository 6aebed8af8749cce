/*
 * Store interop driver: runs the real Java org.apache.rocketmq.store.DefaultMessageStore (4.9.x or 5.x, whichever
 * rocketmq-store is on the classpath) to
 *   write  - put a deterministic dataset into a fresh store directory and dump a manifest of what was stored;
 *   read   - open an existing store directory (written by Java or by the Rust store), read back every message of
 *            every consume queue plus key lookups through the index, and dump the same kind of manifest.
 * See README.md in this directory for the dataset and the manifest contract.
 *
 * The file compiles against both 4.9.7 and 5.3.3. Where the two APIs differ it uses reflection:
 *   - DefaultMessageStore constructor (5.x adds a topicConfigTable argument);
 *   - MessageExtBrokerInner lives in org.apache.rocketmq.store (4.9) or org.apache.rocketmq.common.message (5.x),
 *     so it is created, filled through its MessageExt super type, and handed to putMessage reflectively;
 *   - BrokerConfig.setListenPort exists only in 5.x (4.9 keeps the port in NettyServerConfig).
 */

import java.io.File;
import java.io.IOException;
import java.io.Writer;
import java.lang.reflect.Constructor;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.net.InetSocketAddress;
import java.net.SocketAddress;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.security.MessageDigest;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Comparator;
import java.util.LinkedHashMap;
import java.util.LinkedHashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.TreeSet;
import java.util.concurrent.ConcurrentHashMap;

import org.apache.rocketmq.common.BrokerConfig;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.UtilAll;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageAccessor;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageExtBatch;
import org.apache.rocketmq.store.AppendMessageResult;
import org.apache.rocketmq.store.DefaultMessageStore;
import org.apache.rocketmq.store.GetMessageResult;
import org.apache.rocketmq.store.GetMessageStatus;
import org.apache.rocketmq.store.PutMessageResult;
import org.apache.rocketmq.store.QueryMessageResult;
import org.apache.rocketmq.store.config.BrokerRole;
import org.apache.rocketmq.store.config.FlushDiskType;
import org.apache.rocketmq.store.config.MessageStoreConfig;
import org.apache.rocketmq.store.stats.BrokerStatsManager;

public class StoreInterop {

    static final String STORE_IP = "127.0.0.1";
    static final int STORE_PORT = 10911;
    static final int DEFAULT_COUNT = 10000;
    static final int DEFAULT_COMMITLOG_FILE_SIZE = 8 * 1024 * 1024;
    static final int DEFAULT_CQ_FILE_SIZE = 300000 * 20;
    static final long BORN_TIMESTAMP_BASE = 1700000000000L;
    static final int KEY_QUERY_MAX_NUM = 64;
    static final int MESSAGE_KEYS_CAP = 200;
    static final String READ_GROUP = "interop";
    static final long DISPATCH_DEADLINE_MS = 120_000;

    // ------------------------------------------------------------------ options

    static final class Options {
        String command;
        File storeDir;
        File manifest;
        int count = DEFAULT_COUNT;
        int commitLogFileSize = DEFAULT_COMMITLOG_FILE_SIZE;
        int cqFileSize = DEFAULT_CQ_FILE_SIZE;
        List<String> extraKeys = new ArrayList<>();
    }

    static Options parse(String[] args) {
        if (args.length < 3 || !(args[0].equals("write") || args[0].equals("read"))) {
            usage("expected: write|read <storeDir> <manifestOut> [options]");
        }
        Options o = new Options();
        o.command = args[0];
        o.storeDir = new File(args[1]).getAbsoluteFile();
        o.manifest = new File(args[2]).getAbsoluteFile();
        for (int i = 3; i < args.length; i++) {
            String a = args[i];
            String v = i + 1 < args.length ? args[i + 1] : null;
            if (v == null) {
                usage("option " + a + " needs a value");
            }
            switch (a) {
                case "--count": o.count = Integer.parseInt(v); break;
                case "--commitlog-file-size": o.commitLogFileSize = Integer.parseInt(v); break;
                case "--cq-file-size": o.cqFileSize = Integer.parseInt(v); break;
                case "--keys":
                    for (String k : v.split(",")) {
                        if (!k.isEmpty()) {
                            o.extraKeys.add(k);
                        }
                    }
                    break;
                default: usage("unknown option " + a);
            }
            i++;
        }
        return o;
    }

    static void usage(String why) {
        System.err.println("StoreInterop: " + why);
        System.err.println("usage: StoreInterop write <storeDir> <manifestOut> [--count N] [--commitlog-file-size BYTES] [--cq-file-size BYTES] [--keys k1,k2]");
        System.err.println("       StoreInterop read  <storeDir> <manifestOut> [--commitlog-file-size BYTES] [--cq-file-size BYTES] [--keys k1,k2]");
        System.exit(2);
    }

    public static void main(String[] args) throws Exception {
        Options o = parse(args);
        int rc;
        try {
            rc = o.command.equals("write") ? write(o) : read(o);
        } catch (Throwable t) {
            System.err.println("StoreInterop: FAILED: " + t);
            t.printStackTrace();
            rc = 1;
        }
        // The store and BrokerStatsManager leave non-daemon threads behind.
        System.out.flush();
        System.err.flush();
        Runtime.getRuntime().halt(rc);
    }

    static String javaVersion() {
        // "V4_9_7" -> "4.9.7"
        return MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION).substring(1).replace('_', '.');
    }

    // ------------------------------------------------------------------ store setup (version-dependent parts)

    static DefaultMessageStore openStore(Options o) throws Exception {
        MessageStoreConfig cfg = new MessageStoreConfig();
        cfg.setStorePathRootDir(o.storeDir.getPath());
        cfg.setStorePathCommitLog(new File(o.storeDir, "commitlog").getPath());
        cfg.setMappedFileSizeCommitLog(o.commitLogFileSize);
        cfg.setMappedFileSizeConsumeQueue(o.cqFileSize);
        cfg.setFlushDiskType(FlushDiskType.ASYNC_FLUSH); // shutdown() does the final flush
        cfg.setBrokerRole(BrokerRole.ASYNC_MASTER);
        cfg.setMessageIndexEnable(true);
        cfg.setHaListenPort(0); // ephemeral: do not collide with a broker running on this machine

        BrokerConfig brokerConfig = new BrokerConfig();
        brokerConfig.setBrokerIP1(STORE_IP);
        invokeIfPresent(brokerConfig, "setListenPort", int.class, STORE_PORT); // 5.x only

        BrokerStatsManager stats = new BrokerStatsManager(brokerConfig.getBrokerClusterName(), true);

        for (Constructor<?> c : DefaultMessageStore.class.getConstructors()) {
            Class<?>[] p = c.getParameterTypes();
            try {
                if (p.length == 4) { // 4.9: (config, stats, arrivingListener, brokerConfig)
                    return (DefaultMessageStore) c.newInstance(cfg, stats, null, brokerConfig);
                }
                if (p.length == 5 && p[4] == java.util.concurrent.ConcurrentMap.class) { // 5.x: + topicConfigTable
                    return (DefaultMessageStore) c.newInstance(cfg, stats, null, brokerConfig, new ConcurrentHashMap<>());
                }
            } catch (InvocationTargetException e) {
                throw asException(e.getCause());
            }
        }
        throw new IllegalStateException("no known DefaultMessageStore constructor");
    }

    static final Class<?> BROKER_INNER = firstClass(
        "org.apache.rocketmq.common.message.MessageExtBrokerInner", // 5.x
        "org.apache.rocketmq.store.MessageExtBrokerInner");          // 4.9

    static MessageExt newBrokerInner() throws Exception {
        return (MessageExt) BROKER_INNER.getConstructor().newInstance();
    }

    static PutMessageResult putSingle(DefaultMessageStore store, MessageExt inner) throws Exception {
        Method setProps = BROKER_INNER.getMethod("setPropertiesString", String.class);
        setProps.invoke(inner, MessageDecoder.messageProperties2String(inner.getProperties()));
        Method put = DefaultMessageStore.class.getMethod("putMessage", BROKER_INNER);
        try {
            return (PutMessageResult) put.invoke(store, inner);
        } catch (InvocationTargetException e) {
            throw asException(e.getCause());
        }
    }

    static long maxOffsetInQueue(DefaultMessageStore store, String topic, int queueId) throws Exception {
        return store.getMaxOffsetInQueue(topic, queueId); // throws a checked exception in 5.x only
    }

    static Class<?> firstClass(String... names) {
        for (String n : names) {
            try {
                return Class.forName(n);
            } catch (ClassNotFoundException ignored) {
            }
        }
        throw new IllegalStateException("none of " + Arrays.toString(names) + " on the classpath");
    }

    static void invokeIfPresent(Object target, String name, Class<?> type, Object arg) throws Exception {
        try {
            target.getClass().getMethod(name, type).invoke(target, arg);
        } catch (NoSuchMethodException ignored) {
        }
    }

    static Exception asException(Throwable t) {
        return t instanceof Exception ? (Exception) t : new RuntimeException(t);
    }

    // ------------------------------------------------------------------ the dataset

    /** One message of the dataset (see README.md); batch members take topic/queue/born* from the batch head. */
    static final class Spec {
        int i;
        String topic;
        int queueId;
        byte[] body;
        int flag;
        long bornTimestamp;
        int bornPort;
        Map<String, String> props; // insertion order as put (TAGS, KEYS, UNIQ_KEY, p)
    }

    static Spec spec(int i) {
        Spec s = new Spec();
        s.i = i;
        s.topic = "T" + (i % 4);
        s.queueId = (i / 4) % 4;
        int len = i % 997 == 0 ? 512 * 1024 + i : 1 + (i * 7919) % 2048;
        s.body = new byte[len];
        for (int j = 0; j < len; j++) {
            s.body[j] = (byte) ((i * 31 + j) & 0xFF);
        }
        s.flag = i % 100;
        s.bornTimestamp = BORN_TIMESTAMP_BASE + i;
        s.bornPort = 40000 + i % 1000;
        s.props = new LinkedHashMap<>();
        s.props.put(MessageConst.PROPERTY_TAGS, "Tag" + (char) ('A' + i % 5));
        if (i % 10 == 0) {
            s.props.put(MessageConst.PROPERTY_KEYS, "key-" + i + " order-" + (i % 50));
        }
        s.props.put(MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX, String.format("%032X", i));
        s.props.put("p", "v" + i);
        return s;
    }

    static boolean isBatchHead(int i) {
        return i % 500 == 100;
    }

    // ------------------------------------------------------------------ write

    static int write(Options o) throws Exception {
        String[] existing = o.storeDir.list();
        if (existing != null && existing.length > 0) {
            System.err.println("StoreInterop: refusing to write into non-empty directory " + o.storeDir);
            return 2;
        }
        Timer t = new Timer();
        DefaultMessageStore store = openStore(o);
        if (!store.load()) {
            System.err.println("StoreInterop: load() returned false on a fresh directory");
            return 3;
        }
        store.start();
        t.lap("open (construct+load+start)");

        SocketAddress storeHost = new InetSocketAddress(STORE_IP, STORE_PORT);
        List<Rec> written = new ArrayList<>();
        Map<String, Long> expectedPerQueue = new TreeMap<>();
        int batches = 0;
        int i = 0;
        while (i < o.count) {
            if (isBatchHead(i)) {
                int end = Math.min(i + 10, o.count);
                written.addAll(putBatch(store, storeHost, i, end));
                batches++;
                i = end;
            } else {
                written.add(putOne(store, storeHost, spec(i)));
                i++;
            }
        }
        for (Rec r : written) {
            expectedPerQueue.merge(r.topic + "/" + r.queueId, 1L, Long::sum);
        }
        t.lap("put " + o.count + " messages (" + batches + " batches)");

        waitForDispatch(store, expectedPerQueue);
        t.lap("wait for dispatch");

        written.sort(Comparator.comparingLong(r -> r.physicalOffset));
        Set<String> topics = new TreeSet<>();
        for (Rec r : written) {
            topics.add(r.topic);
        }
        List<KeyQuery> queries = runKeyQueries(store, topics, keysToQuery(written, o.extraKeys));
        t.lap("key queries (" + queries.size() + ")");

        long maxPhy = store.getMaxPhyOffset();
        store.shutdown();
        t.lap("shutdown");

        writeManifest(o.manifest, written, queries);
        t.lap("write manifest");

        if (new File(o.storeDir, "abort").exists()) {
            System.err.println("StoreInterop: WARNING: abort file still present after shutdown");
        }
        System.out.println("summary: javaVersion=" + javaVersion() + " command=write count=" + written.size()
            + " maxPhysicalOffset=" + maxPhy + " commitlog=" + listCommitLog(o.storeDir) + " timings=" + t);
        return 0;
    }

    static Rec putOne(DefaultMessageStore store, SocketAddress storeHost, Spec s) throws Exception {
        MessageExt inner = newBrokerInner();
        inner.setTopic(s.topic);
        inner.setQueueId(s.queueId);
        inner.setBody(s.body);
        inner.setFlag(s.flag);
        inner.setBornTimestamp(s.bornTimestamp);
        inner.setBornHost(new InetSocketAddress(STORE_IP, s.bornPort));
        inner.setStoreHost(storeHost);
        inner.setSysFlag(0);
        inner.setReconsumeTimes(0);
        for (Map.Entry<String, String> e : s.props.entrySet()) {
            MessageAccessor.putProperty(inner, e.getKey(), e.getValue());
        }
        PutMessageResult pr = putSingle(store, inner);
        if (pr == null || !pr.isOk()) {
            throw new IllegalStateException("putMessage " + s.i + " failed: " + pr);
        }
        AppendMessageResult ar = pr.getAppendMessageResult();
        Rec r = expected(s, s.topic, s.queueId, s.bornTimestamp, s.bornPort, inner.getProperties());
        r.physicalOffset = ar.getWroteOffset();
        r.queueOffset = ar.getLogicsOffset();
        r.storeTimestamp = ar.getStoreTimestamp();
        r.msgId = MessageDecoder.createMessageId(storeHost, r.physicalOffset);
        check(ar.getWroteBytes() == r.storeSize, "message " + s.i + ": store wrote " + ar.getWroteBytes()
            + " bytes, expected " + r.storeSize);
        check(r.msgId.equals(ar.getMsgId()), "message " + s.i + ": msgId " + ar.getMsgId() + " != " + r.msgId);
        return r;
    }

    /** Messages from..end-1 as ONE MessageExtBatch (topic, queue, bornTimestamp, bornHost of message `from`). */
    static List<Rec> putBatch(DefaultMessageStore store, SocketAddress storeHost, int from, int end) throws Exception {
        Spec head = spec(from);
        List<Message> msgs = new ArrayList<>();
        List<Spec> specs = new ArrayList<>();
        for (int k = from; k < end; k++) {
            Spec s = spec(k);
            Message m = new Message();
            m.setTopic(head.topic);
            m.setBody(s.body);
            m.setFlag(s.flag);
            for (Map.Entry<String, String> e : s.props.entrySet()) {
                MessageAccessor.putProperty(m, e.getKey(), e.getValue());
            }
            msgs.add(m);
            specs.add(s);
        }
        MessageExtBatch batch = new MessageExtBatch();
        batch.setTopic(head.topic);
        batch.setQueueId(head.queueId);
        batch.setBody(MessageDecoder.encodeMessages(msgs));
        batch.setBornTimestamp(head.bornTimestamp);
        batch.setBornHost(new InetSocketAddress(STORE_IP, head.bornPort));
        batch.setStoreHost(storeHost);
        batch.setSysFlag(0);
        batch.setReconsumeTimes(0);
        PutMessageResult pr = store.putMessages(batch);
        if (pr == null || !pr.isOk()) {
            throw new IllegalStateException("putMessages " + from + ".." + (end - 1) + " failed: " + pr);
        }
        AppendMessageResult ar = pr.getAppendMessageResult();
        check(ar.getMsgNum() == msgs.size(), "batch " + from + ": msgNum " + ar.getMsgNum());
        String[] ids = ar.getMsgId().split(",");
        check(ids.length == msgs.size(), "batch " + from + ": " + ids.length + " msg ids");
        List<Rec> out = new ArrayList<>();
        long phy = ar.getWroteOffset();
        int total = 0;
        for (int k = 0; k < specs.size(); k++) {
            Rec r = expected(specs.get(k), head.topic, head.queueId, head.bornTimestamp, head.bornPort,
                msgs.get(k).getProperties());
            r.physicalOffset = phy;
            r.queueOffset = ar.getLogicsOffset() + k;
            r.storeTimestamp = ar.getStoreTimestamp();
            r.msgId = MessageDecoder.createMessageId(storeHost, phy);
            check(r.msgId.equals(ids[k]), "batch " + from + " member " + k + ": msgId " + ids[k] + " != " + r.msgId);
            phy += r.storeSize;
            total += r.storeSize;
            out.add(r);
        }
        check(total == ar.getWroteBytes(), "batch " + from + ": wrote " + ar.getWroteBytes() + " bytes, expected " + total);
        return out;
    }

    /** The manifest record of what is about to be stored; offsets and store time are filled in after the put. */
    static Rec expected(Spec s, String topic, int queueId, long bornTs, int bornPort, Map<String, String> props) {
        byte[] propBytes = MessageDecoder.messageProperties2String(props).getBytes(StandardCharsets.UTF_8);
        Rec r = new Rec();
        r.topic = topic;
        r.queueId = queueId;
        // v1 record, IPv4 born and store host: 91 fixed bytes + body + topic + properties
        r.storeSize = 91 + s.body.length + topic.getBytes(StandardCharsets.UTF_8).length + propBytes.length;
        r.bornTimestamp = bornTs;
        r.sysFlag = 0;
        r.flag = s.flag;
        r.reconsumeTimes = 0;
        r.bodyCrc = UtilAll.crc32(s.body);
        r.bodyLength = s.body.length;
        r.bodySha256 = sha256(s.body);
        // what a reader decodes from the stored properties string
        r.properties = new TreeMap<>(MessageDecoder.string2messageProperties(new String(propBytes, StandardCharsets.UTF_8)));
        r.bornHost = STORE_IP + ":" + bornPort;
        r.storeHost = STORE_IP + ":" + STORE_PORT;
        return r;
    }

    static void waitForDispatch(DefaultMessageStore store, Map<String, Long> expectedPerQueue) throws Exception {
        long deadline = System.currentTimeMillis() + DISPATCH_DEADLINE_MS;
        while (true) {
            boolean done = store.dispatchBehindBytes() == 0;
            if (done && expectedPerQueue != null) {
                for (Map.Entry<String, Long> e : expectedPerQueue.entrySet()) {
                    String[] tq = e.getKey().split("/");
                    if (maxOffsetInQueue(store, tq[0], Integer.parseInt(tq[1])) < e.getValue()) {
                        done = false;
                        break;
                    }
                }
            }
            if (done) {
                return;
            }
            if (System.currentTimeMillis() > deadline) {
                throw new IllegalStateException("dispatcher did not catch up within " + DISPATCH_DEADLINE_MS
                    + " ms (behind " + store.dispatchBehindBytes() + " bytes)");
            }
            Thread.sleep(20);
        }
    }

    // ------------------------------------------------------------------ read

    static int read(Options o) throws Exception {
        if (!o.storeDir.isDirectory()) {
            System.err.println("StoreInterop: no such store directory " + o.storeDir);
            return 2;
        }
        Timer t = new Timer();
        boolean abortBefore = new File(o.storeDir, "abort").exists();
        String commitLogBefore = listCommitLog(o.storeDir);
        DefaultMessageStore store = openStore(o);
        if (!store.load()) {
            System.err.println("StoreInterop: DefaultMessageStore.load() returned false for " + o.storeDir
                + " (wrong-size commit-log/consume-queue file, bad file name, or unreadable checkpoint?)");
            try {
                store.shutdown();
            } catch (Throwable ignored) {
                // never started
            }
            return 3;
        }
        t.lap("load");
        store.start();
        t.lap("start");
        waitForDispatch(store, null);
        t.lap("wait for dispatch");

        List<Rec> got = new ArrayList<>();
        Set<String> topics = new TreeSet<>();
        int problems = 0;
        File cqRoot = new File(o.storeDir, "consumequeue");
        for (String topic : sortedNames(cqRoot)) {
            File topicDir = new File(cqRoot, topic);
            if (!topicDir.isDirectory()) {
                continue;
            }
            topics.add(topic);
            for (String q : sortedNames(topicDir)) {
                int queueId;
                try {
                    queueId = Integer.parseInt(q);
                } catch (NumberFormatException e) {
                    continue;
                }
                problems += readQueue(store, topic, queueId, got);
            }
        }
        t.lap("read " + got.size() + " messages");

        got.sort(Comparator.comparingLong((Rec r) -> r.physicalOffset).thenComparing(r -> r.topic)
            .thenComparingInt(r -> r.queueId).thenComparingLong(r -> r.queueOffset));
        List<KeyQuery> queries = runKeyQueries(store, topics, keysToQuery(got, o.extraKeys));
        t.lap("key queries (" + queries.size() + ")");

        long maxPhy = store.getMaxPhyOffset();
        store.shutdown();
        t.lap("shutdown");

        writeManifest(o.manifest, got, queries);
        t.lap("write manifest");
        System.out.println("summary: javaVersion=" + javaVersion() + " command=read count=" + got.size()
            + " maxPhysicalOffset=" + maxPhy + " abortBefore=" + abortBefore
            + " commitlogBefore=" + commitLogBefore + " commitlogAfter=" + listCommitLog(o.storeDir)
            + " problems=" + problems + " timings=" + t);
        if (problems > 0) {
            System.err.println("StoreInterop: " + problems + " queue(s) could not be read completely (see above)");
            return 4;
        }
        return 0;
    }

    /** Reads queue offsets [min, max) of one queue; returns 1 if it stopped early, else 0. */
    static int readQueue(DefaultMessageStore store, String topic, int queueId, List<Rec> out) throws Exception {
        long min = store.getMinOffsetInQueue(topic, queueId);
        long max = maxOffsetInQueue(store, topic, queueId);
        long offset = min;
        while (offset < max) {
            GetMessageResult r = store.getMessage(READ_GROUP, topic, queueId, offset, 32, null);
            if (r == null || r.getStatus() != GetMessageStatus.FOUND || r.getMessageBufferList().isEmpty()) {
                System.err.println("StoreInterop: " + topic + "/" + queueId + " getMessage at " + offset + " (min " + min
                    + ", max " + max + "): " + (r == null ? "null" : r.getStatus() + " next=" + r.getNextBeginOffset()));
                if (r != null) {
                    r.release();
                }
                return 1;
            }
            try {
                for (ByteBuffer b : r.getMessageBufferList()) {
                    out.add(decode(b));
                }
            } finally {
                r.release();
            }
            if (r.getNextBeginOffset() <= offset) {
                System.err.println("StoreInterop: " + topic + "/" + queueId + " no progress at " + offset);
                return 1;
            }
            offset = r.getNextBeginOffset();
        }
        return 0;
    }

    static Rec decode(ByteBuffer stored) {
        MessageExt m = MessageDecoder.decode(stored.slice(), true, false);
        if (m == null) {
            throw new IllegalStateException("MessageDecoder.decode returned null");
        }
        Rec r = new Rec();
        r.topic = m.getTopic();
        r.queueId = m.getQueueId();
        r.queueOffset = m.getQueueOffset();
        r.physicalOffset = m.getCommitLogOffset();
        r.storeSize = m.getStoreSize();
        r.storeTimestamp = m.getStoreTimestamp();
        r.bornTimestamp = m.getBornTimestamp();
        r.sysFlag = m.getSysFlag();
        r.flag = m.getFlag();
        r.reconsumeTimes = m.getReconsumeTimes();
        r.bodyCrc = m.getBodyCRC();
        byte[] body = m.getBody() == null ? new byte[0] : m.getBody();
        r.bodyLength = body.length;
        r.bodySha256 = sha256(body);
        r.properties = new TreeMap<>(m.getProperties() == null ? Map.of() : m.getProperties());
        r.msgId = m.getMsgId();
        r.bornHost = hostString(m.getBornHost());
        r.storeHost = hostString(m.getStoreHost());
        return r;
    }

    // ------------------------------------------------------------------ key queries

    /** --keys first, then the distinct KEYS items of the messages in physical order, at most 200 of the latter. */
    static List<String> keysToQuery(List<Rec> byPhysicalOffset, List<String> extra) {
        Set<String> fromMessages = new LinkedHashSet<>();
        outer:
        for (Rec r : byPhysicalOffset) {
            String keys = r.properties.get(MessageConst.PROPERTY_KEYS);
            if (keys == null) {
                continue;
            }
            for (String k : keys.split(" ")) {
                if (k.isEmpty()) {
                    continue;
                }
                if (fromMessages.size() >= MESSAGE_KEYS_CAP && !fromMessages.contains(k)) {
                    break outer;
                }
                fromMessages.add(k);
            }
        }
        Set<String> all = new LinkedHashSet<>(extra);
        all.addAll(fromMessages);
        return new ArrayList<>(all);
    }

    static List<KeyQuery> runKeyQueries(DefaultMessageStore store, Set<String> topics, List<String> keys) {
        List<KeyQuery> out = new ArrayList<>();
        for (String topic : topics) {
            for (String key : keys) {
                KeyQuery q = new KeyQuery();
                q.topic = topic;
                q.key = key;
                QueryMessageResult res = store.queryMessage(topic, key, KEY_QUERY_MAX_NUM, 0, Long.MAX_VALUE);
                try {
                    for (ByteBuffer b : res.getMessageBufferList()) {
                        q.physicalOffsets.add(b.getLong(b.position() + 28)); // PHYSICALOFFSET field
                    }
                } finally {
                    res.release();
                }
                q.physicalOffsets.sort(null);
                out.add(q);
            }
        }
        out.sort(Comparator.comparing((KeyQuery q) -> q.topic).thenComparing(q -> q.key));
        return out;
    }

    // ------------------------------------------------------------------ manifest

    static final class Rec {
        String topic;
        int queueId;
        long queueOffset;
        long physicalOffset;
        int storeSize;
        long storeTimestamp;
        long bornTimestamp;
        int sysFlag;
        int flag;
        int reconsumeTimes;
        int bodyCrc;
        int bodyLength;
        String bodySha256;
        Map<String, String> properties; // sorted by key in the manifest
        String msgId;
        String bornHost;
        String storeHost;
    }

    static final class KeyQuery {
        String topic;
        String key;
        List<Long> physicalOffsets = new ArrayList<>();
    }

    static void writeManifest(File f, List<Rec> msgs, List<KeyQuery> queries) throws IOException {
        File parent = f.getParentFile();
        if (parent != null) {
            Files.createDirectories(parent.toPath());
        }
        File tmp = new File(f.getPath() + ".tmp");
        try (Writer w = Files.newBufferedWriter(tmp.toPath(), StandardCharsets.UTF_8)) {
            w.write("{\"javaVersion\":");
            w.write(json(javaVersion()));
            w.write(",\n\"messages\":[");
            for (int k = 0; k < msgs.size(); k++) {
                Rec r = msgs.get(k);
                w.write(k == 0 ? "\n" : ",\n");
                StringBuilder sb = new StringBuilder(512);
                sb.append("{\"topic\":").append(json(r.topic))
                    .append(",\"queueId\":").append(r.queueId)
                    .append(",\"queueOffset\":").append(r.queueOffset)
                    .append(",\"physicalOffset\":").append(r.physicalOffset)
                    .append(",\"storeSize\":").append(r.storeSize)
                    .append(",\"storeTimestamp\":").append(r.storeTimestamp)
                    .append(",\"bornTimestamp\":").append(r.bornTimestamp)
                    .append(",\"sysFlag\":").append(r.sysFlag)
                    .append(",\"flag\":").append(r.flag)
                    .append(",\"reconsumeTimes\":").append(r.reconsumeTimes)
                    .append(",\"bodyCrc\":").append(r.bodyCrc)
                    .append(",\"bodyLength\":").append(r.bodyLength)
                    .append(",\"bodySha256\":").append(json(r.bodySha256))
                    .append(",\"properties\":{");
                boolean first = true;
                for (Map.Entry<String, String> e : r.properties.entrySet()) {
                    sb.append(first ? "" : ",").append(json(e.getKey())).append(':').append(json(e.getValue()));
                    first = false;
                }
                sb.append("},\"msgId\":").append(json(r.msgId))
                    .append(",\"bornHost\":").append(json(r.bornHost))
                    .append(",\"storeHost\":").append(json(r.storeHost))
                    .append('}');
                w.write(sb.toString());
            }
            w.write("],\n\"keyQueries\":[");
            for (int k = 0; k < queries.size(); k++) {
                KeyQuery q = queries.get(k);
                w.write(k == 0 ? "\n" : ",\n");
                StringBuilder sb = new StringBuilder();
                sb.append("{\"topic\":").append(json(q.topic)).append(",\"key\":").append(json(q.key))
                    .append(",\"physicalOffsets\":[");
                for (int n = 0; n < q.physicalOffsets.size(); n++) {
                    sb.append(n == 0 ? "" : ",").append(q.physicalOffsets.get(n));
                }
                sb.append("]}");
                w.write(sb.toString());
            }
            w.write("]}\n");
        }
        Files.move(tmp.toPath(), f.toPath(), java.nio.file.StandardCopyOption.REPLACE_EXISTING);
    }

    static String json(String s) {
        if (s == null) {
            return "null";
        }
        StringBuilder sb = new StringBuilder(s.length() + 2).append('"');
        for (int k = 0; k < s.length(); k++) {
            char c = s.charAt(k);
            switch (c) {
                case '"': sb.append("\\\""); break;
                case '\\': sb.append("\\\\"); break;
                case '\n': sb.append("\\n"); break;
                case '\r': sb.append("\\r"); break;
                case '\t': sb.append("\\t"); break;
                default:
                    if (c < 0x20) {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        return sb.append('"').toString();
    }

    // ------------------------------------------------------------------ helpers

    static String hostString(SocketAddress a) {
        InetSocketAddress i = (InetSocketAddress) a;
        return i.getAddress().getHostAddress() + ":" + i.getPort();
    }

    static String sha256(byte[] b) {
        try {
            byte[] d = MessageDigest.getInstance("SHA-256").digest(b);
            StringBuilder sb = new StringBuilder(64);
            for (byte x : d) {
                sb.append(Character.forDigit((x >> 4) & 0xF, 16)).append(Character.forDigit(x & 0xF, 16));
            }
            return sb.toString();
        } catch (Exception e) {
            throw new IllegalStateException(e);
        }
    }

    static List<String> sortedNames(File dir) {
        String[] n = dir.list();
        List<String> l = n == null ? new ArrayList<>() : new ArrayList<>(Arrays.asList(n));
        l.sort(null);
        return l;
    }

    /** "[name:size, ...]" of commitlog/. */
    static String listCommitLog(File storeDir) {
        File dir = new File(storeDir, "commitlog");
        List<String> parts = new ArrayList<>();
        for (String n : sortedNames(dir)) {
            parts.add(n + ":" + new File(dir, n).length());
        }
        return parts.toString().replace(" ", "");
    }

    static void check(boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException(what);
        }
    }

    static final class Timer {
        private long last = System.nanoTime();
        private final StringBuilder laps = new StringBuilder();

        void lap(String what) {
            long now = System.nanoTime();
            long ms = (now - last) / 1_000_000;
            last = now;
            System.err.println("StoreInterop: " + what + ": " + ms + " ms");
            laps.append(laps.length() == 0 ? "" : ",").append(what.replace(' ', '_')).append('=').append(ms);
        }

        @Override
        public String toString() {
            return "{" + laps + "}";
        }
    }
}
