/*
 * Golden wire vectors for the RocketMQ remoting codec.
 *
 * Builds a fixed set of RemotingCommands with the REAL Java classes of rocketmq-remoting (4.9.x or 5.x,
 * whichever is on the classpath), pushes each one through the real org.apache.rocketmq.remoting.netty.NettyEncoder
 * (the handler the Java client/broker/name server put on their channels), and writes the resulting bytes, i.e.
 * the complete frame as it appears on the TCP stream, to <out>/<name>.bin. <out>/manifest.json describes the
 * decoded content of every frame.
 *
 * Compiles unchanged against rocketmq-client 4.9.7 and 5.3.3: classes whose package moved between the two
 * lines (request codes, custom headers, MQVersion is the same) are reached by reflection.
 *
 * Usage: java -cp <client classpath>:<classes> GoldenVectors <out-dir>
 */

import io.netty.buffer.ByteBuf;
import io.netty.channel.embedded.EmbeddedChannel;
import java.lang.reflect.Field;
import java.lang.reflect.Method;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.zip.CRC32;
import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.JSONObject;
import com.alibaba.fastjson.parser.Feature;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.remoting.CommandCustomHeader;
import org.apache.rocketmq.remoting.netty.NettyEncoder;
import org.apache.rocketmq.remoting.protocol.LanguageCode;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.SerializeType;

public final class GoldenVectors {

    /** A custom header without any field: makeCustomHeaderToNet() then leaves an empty (non-null) extFields map. */
    public static final class EmptyHeader implements CommandCustomHeader {
        @Override
        public void checkFields() {
        }
    }

    private interface Builder {
        RemotingCommand build() throws Exception;
    }

    private static final class Vector {
        final String name;
        final String description;
        final Builder builder;

        Vector(String name, String description, Builder builder) {
            this.name = name;
            this.description = description;
            this.builder = builder;
        }
    }

    /** What a decoder must find in one frame (taken from the frame bytes, cross-checked against Java's decoder). */
    private static final class Decoded {
        SerializeType type;
        int code;
        String language;
        int version;
        int opaque;
        int flag;
        String remark;
        LinkedHashMap<String, String> extFields;
        byte[] body;
    }

    private static final String[] HEADER_PACKAGES = {
        "org.apache.rocketmq.remoting.protocol.header.", // 5.x
        "org.apache.rocketmq.common.protocol.header.",   // 4.9.x
    };

    private static final String[] REQUEST_CODE_CLASSES = {
        "org.apache.rocketmq.remoting.protocol.RequestCode", // 5.x
        "org.apache.rocketmq.common.protocol.RequestCode",   // 4.9.x
    };

    private static final String[] RESPONSE_CODE_CLASSES = {
        "org.apache.rocketmq.remoting.protocol.ResponseCode", // 5.x
        "org.apache.rocketmq.common.protocol.ResponseCode",   // 4.9.x
    };

    // Fixed values so that every run produces the same bytes.
    private static final long BORN_TIMESTAMP = 1700000000000L;
    private static final String PROPERTIES = "TAGS\u0001TagA\u0002KEYS\u0001k1 k2\u0002WAIT\u0001true\u0002";

    public static void main(String[] args) throws Exception {
        if (args.length != 1) {
            System.err.println("usage: GoldenVectors <out-dir>");
            System.exit(2);
        }
        Path out = Paths.get(args[0]);
        Files.createDirectories(out);

        // What MQClientAPIImpl does in its static initialiser: every command created afterwards carries the
        // version ordinal of this client release.
        System.setProperty(RemotingCommand.REMOTING_VERSION_KEY, Integer.toString(MQVersion.CURRENT_VERSION));

        List<Vector> vectors = vectors();
        StringBuilder manifest = new StringBuilder("[\n");
        int count = 0;
        int javaReencodeDiffers = 0;
        for (Vector v : vectors) {
            for (SerializeType type : new SerializeType[] {SerializeType.JSON, SerializeType.ROCKETMQ}) {
                String name = v.name + "-" + type.name().toLowerCase();
                // A fresh command per serialize type: encoding mutates the command (extFields gets filled).
                RemotingCommand cmd = v.builder.build();
                cmd.setSerializeTypeCurrentRPC(type);
                byte[] frame = wireBytes(cmd);
                Decoded d = parseFrame(frame);
                check(name, d.type == type, "serialize type byte");
                crossCheckWithJava(name, frame, d);
                boolean javaReencodeIdentical = Arrays.equals(frame, javaReencode(frame));
                if (!javaReencodeIdentical) {
                    javaReencodeDiffers++;
                }
                Files.write(out.resolve(name + ".bin"), frame);
                if (count > 0) {
                    manifest.append(",\n");
                }
                appendEntry(manifest, name, v.description, d, javaReencodeIdentical);
                count++;
            }
        }
        manifest.append("\n]\n");
        Files.write(out.resolve("manifest.json"), manifest.toString().getBytes(StandardCharsets.UTF_8));
        System.out.println("GoldenVectors: wrote " + count + " frames (version " + MQVersion.CURRENT_VERSION + ", "
            + javaReencodeDiffers + " not byte-identical after a Java decode+encode)");
    }

    // ------------------------------------------------------------------------------------------------
    // The vectors

    private static List<Vector> vectors() {
        List<Vector> l = new ArrayList<>();

        l.add(new Vector("get_routeinfo_by_topic",
            "GET_ROUTEINFO_BY_TOPIC request as the Java client builds it (GetRouteInfoRequestHeader topic=TopicTest), no body",
            () -> {
                Object h = header("namesrv.GetRouteInfoRequestHeader");
                set(h, "setTopic", "TopicTest");
                RemotingCommand c = RemotingCommand.createRequestCommand(requestCode("GET_ROUTEINFO_BY_TOPIC"), (CommandCustomHeader) h);
                c.setOpaque(1);
                return c;
            }));

        l.add(new Vector("send_message_v2",
            "SEND_MESSAGE_V2 request: SendMessageRequestHeaderV2 made from a SendMessageRequestHeader (FastCodesHeader), body \"Hello\"",
            () -> {
                RemotingCommand c = RemotingCommand.createRequestCommand(requestCode("SEND_MESSAGE_V2"), sendHeaderV2());
                c.setOpaque(2);
                c.setBody("Hello".getBytes(StandardCharsets.UTF_8));
                return c;
            }));

        l.add(new Vector("send_message_v1",
            "SEND_MESSAGE (10) request with the long-name SendMessageRequestHeader (not a FastCodesHeader), body \"Hello\"",
            () -> {
                RemotingCommand c = RemotingCommand.createRequestCommand(requestCode("SEND_MESSAGE"), (CommandCustomHeader) sendHeaderV1());
                c.setOpaque(12);
                c.setBody("Hello".getBytes(StandardCharsets.UTF_8));
                return c;
            }));

        l.add(new Vector("pull_message",
            "PULL_MESSAGE request with PullMessageRequestHeader (FastCodesHeader) as a push consumer sends it, no body",
            () -> {
                Object h = header("PullMessageRequestHeader");
                set(h, "setConsumerGroup", "cg");
                set(h, "setTopic", "TopicTest");
                set(h, "setQueueId", 2);
                set(h, "setQueueOffset", 1234L);
                set(h, "setMaxMsgNums", 32);
                set(h, "setSysFlag", 3);
                set(h, "setCommitOffset", 1200L);
                set(h, "setSuspendTimeoutMillis", 15000L);
                set(h, "setSubscription", "TagA || TagB");
                set(h, "setSubVersion", 1700000000123L);
                set(h, "setExpressionType", "TAG");
                set(h, "setBname", "broker-a");
                RemotingCommand c = RemotingCommand.createRequestCommand(requestCode("PULL_MESSAGE"), (CommandCustomHeader) h);
                c.setOpaque(3);
                return c;
            }));

        l.add(new Vector("send_response_success",
            "broker's SUCCESS response to a send: createResponseCommand(SendMessageResponseHeader) + MSG_REGION/TRACE_ON ext fields, opaque of the request",
            () -> {
                RemotingCommand c = RemotingCommand.createResponseCommand(headerClass("SendMessageResponseHeader"));
                Object h = c.readCustomHeader();
                c.setCode(responseCode("SUCCESS"));
                c.setRemark(null);
                c.setOpaque(2);
                set(h, "setMsgId", "C0A8000A00002A9F0000000000003039");
                set(h, "setQueueId", 2);
                set(h, "setQueueOffset", 42L);
                c.addExtField("MSG_REGION", "DefaultRegion");
                c.addExtField("TRACE_ON", "true");
                return c;
            }));

        l.add(new Vector("error_response_remark",
            "broker's TOPIC_NOT_EXIST answer to a send (SendMessageResponseHeader left empty + MSG_REGION/TRACE_ON) whose remark has non-ASCII text, a control character, a quote and a backslash",
            () -> {
                RemotingCommand c = RemotingCommand.createResponseCommand(headerClass("SendMessageResponseHeader"));
                c.setCode(responseCode("TOPIC_NOT_EXIST"));
                c.setRemark("主题不存在 topic[x] not exist, apply first please! \u0001 \"quoted\" back\\slash");
                c.setOpaque(5);
                c.addExtField("MSG_REGION", "DefaultRegion");
                c.addExtField("TRACE_ON", "true");
                return c;
            }));

        l.add(new Vector("remark_escape_zoo",
            "SYSTEM_ERROR response whose remark holds every C0 control character, DEL, C1 U+0085, U+2028/U+2029, '/', '<', a 4-byte UTF-8 emoji, quote and backslash",
            () -> {
                StringBuilder s = new StringBuilder("c0[");
                for (char ch = 0; ch < 0x20; ch++) {
                    s.append(ch);
                }
                s.append("] del[\u007f] c1[\u0085] ls[\u2028] ps[\u2029] slash[/] lt[<] amp[&] emoji[\ud83d\ude00] quote[\"] bs[\\] nbsp[\u00a0] bom[\ufeff]");
                RemotingCommand c = RemotingCommand.createResponseCommand(responseCode("SYSTEM_ERROR"), s.toString());
                c.setOpaque(17);
                return c;
            }));

        l.add(new Vector("response_empty_remark",
            "SYSTEM_ERROR response with remark \"\" (JSON keeps \"remark\":\"\"; ROCKETMQ writes remark length 0, i.e. null)",
            () -> {
                RemotingCommand c = RemotingCommand.createResponseCommand(responseCode("SYSTEM_ERROR"), "");
                c.setOpaque(18);
                return c;
            }));

        l.add(new Vector("oneway_update_consumer_offset",
            "UPDATE_CONSUMER_OFFSET request marked oneway (markOnewayRPC, flag 2), no body",
            () -> {
                Object h = header("UpdateConsumerOffsetRequestHeader");
                set(h, "setConsumerGroup", "cg");
                set(h, "setTopic", "TopicTest");
                set(h, "setQueueId", 1);
                set(h, "setCommitOffset", 987654321012L);
                set(h, "setBname", "broker-a");
                RemotingCommand c = RemotingCommand.createRequestCommand(requestCode("UPDATE_CONSUMER_OFFSET"), (CommandCustomHeader) h);
                c.markOnewayRPC();
                c.setOpaque(6);
                return c;
            }));

        l.add(new Vector("heart_beat",
            "HEART_BEAT request with a HeartbeatData JSON body; header as this client line builds it (4.9: none, 5.x: empty HeartbeatRequestHeader)",
            () -> {
                Class<?> hc = optionalClass("org.apache.rocketmq.remoting.protocol.header.HeartbeatRequestHeader");
                CommandCustomHeader h = hc == null ? null : (CommandCustomHeader) hc.getDeclaredConstructor().newInstance();
                RemotingCommand c = RemotingCommand.createRequestCommand(requestCode("HEART_BEAT"), h);
                c.setOpaque(7);
                c.setBody(("{\"clientID\":\"10.0.0.7@4242#1187343240139\",\"consumerDataSet\":[{\"consumeFromWhere\":"
                    + "\"CONSUME_FROM_LAST_OFFSET\",\"consumeType\":\"CONSUME_PASSIVELY\",\"groupName\":\"cg\","
                    + "\"messageModel\":\"CLUSTERING\",\"subscriptionDataSet\":[{\"classFilterMode\":false,"
                    + "\"codeSet\":[2598919,2598920],\"expressionType\":\"TAG\",\"subString\":\"TagA || TagB\","
                    + "\"subVersion\":1700000000123,\"tagsSet\":[\"TagA\",\"TagB\"],\"topic\":\"TopicTest\"}],"
                    + "\"unitMode\":false}],\"producerDataSet\":[{\"groupName\":\"CLIENT_INNER_PRODUCER\"}]}")
                    .getBytes(StandardCharsets.UTF_8));
                return c;
            }));

        l.add(new Vector("register_broker",
            "REGISTER_BROKER request with RegisterBrokerRequestHeader (bodyCrc32 of the body) and a JSON RegisterBrokerBody-like body",
            () -> {
                byte[] body = ("{\"filterServerList\":[],\"topicConfigSerializeWrapper\":{\"dataVersion\":{\"counter\":1,"
                    + "\"stateVersion\":0,\"timestamp\":1700000000000},\"topicConfigTable\":{\"TopicTest\":{\"order\":false,"
                    + "\"perm\":6,\"readQueueNums\":4,\"topicFilterType\":\"SINGLE_TAG\",\"topicName\":\"TopicTest\","
                    + "\"topicSysFlag\":0,\"writeQueueNums\":4}}}}").getBytes(StandardCharsets.UTF_8);
                CRC32 crc = new CRC32();
                crc.update(body);
                Object h = header("namesrv.RegisterBrokerRequestHeader");
                set(h, "setBrokerName", "broker-a");
                set(h, "setBrokerAddr", "192.168.0.10:10911");
                set(h, "setClusterName", "DefaultCluster");
                set(h, "setHaServerAddr", "192.168.0.10:10912");
                set(h, "setBrokerId", 0L);
                set(h, "setCompressed", false);
                set(h, "setBodyCrc32", (int) (crc.getValue() & 0x7FFFFFFF));
                RemotingCommand c = RemotingCommand.createRequestCommand(requestCode("REGISTER_BROKER"), (CommandCustomHeader) h);
                c.setOpaque(8);
                c.setBody(body);
                return c;
            }));

        l.add(new Vector("get_broker_cluster_info",
            "GET_BROKER_CLUSTER_INFO request with no custom header (extFields stays null), no body",
            () -> {
                RemotingCommand c = RemotingCommand.createRequestCommand(requestCode("GET_BROKER_CLUSTER_INFO"), null);
                c.setOpaque(9);
                return c;
            }));

        l.add(new Vector("empty_ext_fields",
            "GET_ALL_TOPIC_LIST_FROM_NAMESERVER request with a field-less custom header: extFields is an empty map (JSON {}, ROCKETMQ ext length 0 = null)",
            () -> {
                RemotingCommand c = RemotingCommand.createRequestCommand(requestCode("GET_ALL_TOPIC_LIST_FROM_NAMESERVER"), new EmptyHeader());
                c.setOpaque(10);
                return c;
            }));

        l.add(new Vector("binary_body",
            "SUCCESS response to a pull (PullMessageResponseHeader, a FastCodesHeader) with a binary body of bytes 0x00..0xFF",
            () -> {
                RemotingCommand c = RemotingCommand.createResponseCommand(headerClass("PullMessageResponseHeader"));
                Object h = c.readCustomHeader();
                c.setCode(responseCode("SUCCESS"));
                c.setRemark(null);
                c.setOpaque(3);
                set(h, "setSuggestWhichBrokerId", 0L);
                set(h, "setNextBeginOffset", 1266L);
                set(h, "setMinOffset", 0L);
                set(h, "setMaxOffset", 1266L);
                byte[] body = new byte[256];
                for (int i = 0; i < 256; i++) {
                    body[i] = (byte) i;
                }
                c.setBody(body);
                return c;
            }));

        l.add(new Vector("opaque_max",
            "GET_ROUTEINFO_BY_TOPIC request with opaque Integer.MAX_VALUE",
            () -> routeRequest(Integer.MAX_VALUE)));

        l.add(new Vector("opaque_min",
            "GET_ROUTEINFO_BY_TOPIC request with opaque Integer.MIN_VALUE",
            () -> routeRequest(Integer.MIN_VALUE)));

        l.add(new Vector("opaque_negative",
            "GET_ROUTEINFO_BY_TOPIC request with opaque -1",
            () -> routeRequest(-1)));

        l.add(new Vector("ext_empty_value",
            "GET_KV_CONFIG request whose ext field 'key' is the empty string (ROCKETMQ: value length 0, Java reads it back as null)",
            () -> {
                RemotingCommand c = RemotingCommand.createRequestCommand(requestCode("GET_KV_CONFIG"), null);
                c.addExtField("namespace", "ORDER_TOPIC_CONFIG");
                c.addExtField("key", "");
                c.setOpaque(14);
                return c;
            }));

        l.add(new Vector("ext_non_ascii",
            "request whose ext fields have a non-ASCII key and non-ASCII/control-character values",
            () -> {
                RemotingCommand c = RemotingCommand.createRequestCommand(requestCode("PUT_KV_CONFIG"), null);
                c.addExtField("namespace", "命名空间");
                c.addExtField("主题", "值 ✓ \ud83d\ude00");
                c.addExtField("value", "a\u0001b\u0002c\td\"e\\f");
                c.setOpaque(15);
                return c;
            }));

        l.add(new Vector("language_go",
            "GET_ROUTEINFO_BY_TOPIC request carrying language GO and version 317 (what the Go client sends)",
            () -> {
                RemotingCommand c = routeRequest(16);
                c.setLanguage(LanguageCode.valueOf("GO"));
                c.setVersion(317);
                return c;
            }));

        return l;
    }

    private static RemotingCommand routeRequest(int opaque) throws Exception {
        Object h = header("namesrv.GetRouteInfoRequestHeader");
        set(h, "setTopic", "TopicTest");
        RemotingCommand c = RemotingCommand.createRequestCommand(requestCode("GET_ROUTEINFO_BY_TOPIC"), (CommandCustomHeader) h);
        c.setOpaque(opaque);
        return c;
    }

    private static Object sendHeaderV1() throws Exception {
        Object h = header("SendMessageRequestHeader");
        set(h, "setProducerGroup", "pg");
        set(h, "setTopic", "TopicTest");
        set(h, "setDefaultTopic", "TBW102");
        set(h, "setDefaultTopicQueueNums", 4);
        set(h, "setQueueId", 2);
        set(h, "setSysFlag", 0);
        set(h, "setBornTimestamp", BORN_TIMESTAMP);
        set(h, "setFlag", 0);
        set(h, "setProperties", PROPERTIES);
        set(h, "setReconsumeTimes", 0);
        set(h, "setUnitMode", false);
        set(h, "setBatch", false);
        set(h, "setBname", "broker-a");
        return h;
    }

    private static CommandCustomHeader sendHeaderV2() throws Exception {
        Object v1 = sendHeaderV1();
        Class<?> v2 = headerClass("SendMessageRequestHeaderV2");
        Method m = v2.getMethod("createSendMessageRequestHeaderV2", v1.getClass());
        return (CommandCustomHeader) m.invoke(null, v1);
    }

    // ------------------------------------------------------------------------------------------------
    // Encoding: the real NettyEncoder on an embedded channel = the bytes Java writes to the socket.

    private static byte[] wireBytes(RemotingCommand cmd) {
        EmbeddedChannel ch = new EmbeddedChannel(new NettyEncoder());
        try {
            if (!ch.writeOutbound(cmd)) {
                throw new IllegalStateException("encoder produced nothing");
            }
            java.io.ByteArrayOutputStream bytes = new java.io.ByteArrayOutputStream();
            Object o;
            while ((o = ch.readOutbound()) != null) {
                ByteBuf b = (ByteBuf) o;
                byte[] a = new byte[b.readableBytes()];
                b.readBytes(a);
                b.release();
                bytes.write(a, 0, a.length);
            }
            return bytes.toByteArray();
        } finally {
            ch.finishAndReleaseAll();
        }
    }

    /** Java's own round trip (decode as NettyDecoder would, then encode again), for information only. */
    private static byte[] javaReencode(byte[] frame) throws Exception {
        RemotingCommand again = RemotingCommand.decode(ByteBuffer.wrap(frame, 4, frame.length - 4).slice());
        return wireBytes(again);
    }

    // ------------------------------------------------------------------------------------------------
    // Independent frame parser (keeps the wire order of ext fields and empty strings as they are).

    private static Decoded parseFrame(byte[] f) {
        ByteBuffer b = ByteBuffer.wrap(f);
        int total = b.getInt();
        if (total != f.length - 4) {
            throw new IllegalStateException("frame length " + total + " != " + (f.length - 4));
        }
        int w = b.getInt();
        int type = (w >>> 24) & 0xFF;
        int headerLen = w & 0xFFFFFF;
        Decoded d = new Decoded();
        byte[] header = new byte[headerLen];
        b.get(header);
        if (type == 0) {
            d.type = SerializeType.JSON;
            String text = new String(header, StandardCharsets.UTF_8);
            JSONObject o = JSON.parseObject(text, Feature.OrderedField);
            d.code = o.getIntValue("code");
            d.language = o.getString("language");
            d.version = o.getIntValue("version");
            d.opaque = o.getIntValue("opaque");
            d.flag = o.getIntValue("flag");
            d.remark = o.getString("remark");
            JSONObject ext = o.getJSONObject("extFields");
            if (ext != null) {
                d.extFields = new LinkedHashMap<>();
                for (Map.Entry<String, Object> e : ext.entrySet()) {
                    if (!(e.getValue() instanceof String)) {
                        throw new IllegalStateException("non-string ext value " + e);
                    }
                    d.extFields.put(e.getKey(), (String) e.getValue());
                }
            }
        } else if (type == 1) {
            d.type = SerializeType.ROCKETMQ;
            ByteBuffer h = ByteBuffer.wrap(header);
            d.code = h.getShort();
            d.language = LanguageCode.valueOf(h.get()).name();
            d.version = h.getShort();
            d.opaque = h.getInt();
            d.flag = h.getInt();
            int remarkLen = h.getInt();
            d.remark = remarkLen == 0 ? null : utf8(h, remarkLen);
            int extLen = h.getInt();
            if (extLen > 0) {
                d.extFields = new LinkedHashMap<>();
                int end = h.position() + extLen;
                while (h.position() < end) {
                    String k = utf8(h, h.getShort());
                    String v = utf8(h, h.getInt());
                    d.extFields.put(k, v);
                }
                if (h.position() != end) {
                    throw new IllegalStateException("ext block overrun");
                }
            }
            if (h.hasRemaining()) {
                throw new IllegalStateException("trailing bytes in ROCKETMQ header");
            }
        } else {
            throw new IllegalStateException("unknown serialize type " + type);
        }
        if (b.hasRemaining()) {
            d.body = new byte[b.remaining()];
            b.get(d.body);
        }
        return d;
    }

    private static String utf8(ByteBuffer b, int len) {
        byte[] a = new byte[len];
        b.get(a);
        return new String(a, StandardCharsets.UTF_8);
    }

    private static void crossCheckWithJava(String name, byte[] frame, Decoded d) throws Exception {
        RemotingCommand j = RemotingCommand.decode(ByteBuffer.wrap(frame, 4, frame.length - 4).slice());
        check(name, j.getSerializeTypeCurrentRPC() == d.type, "type");
        check(name, j.getCode() == d.code, "code");
        check(name, j.getLanguage().name().equals(d.language), "language");
        check(name, j.getVersion() == d.version, "version");
        check(name, j.getOpaque() == d.opaque, "opaque");
        check(name, j.getFlag() == d.flag, "flag");
        check(name, Objects.equals(j.getRemark(), d.remark), "remark");
        check(name, Arrays.equals(j.getBody(), d.body), "body");
        // Java's ROCKETMQ reader turns zero-length values into null; compare modulo that.
        HashMap<String, String> je = j.getExtFields();
        if (d.extFields == null) {
            check(name, je == null, "extFields null");
        } else {
            check(name, je != null && je.size() == d.extFields.size(), "extFields size");
            for (Map.Entry<String, String> e : d.extFields.entrySet()) {
                String expect = d.type == SerializeType.ROCKETMQ && e.getValue().isEmpty() ? null : e.getValue();
                check(name, je.containsKey(e.getKey()) && Objects.equals(je.get(e.getKey()), expect), "ext " + e.getKey());
            }
        }
    }

    private static void check(String name, boolean ok, String what) {
        if (!ok) {
            throw new IllegalStateException(name + ": mismatch in " + what);
        }
    }

    // ------------------------------------------------------------------------------------------------
    // Manifest (hand-rolled JSON writer)

    private static void appendEntry(StringBuilder sb, String name, String description, Decoded d, boolean javaReencodeIdentical) {
        sb.append("  {\n");
        sb.append("    \"name\": ").append(q(name)).append(",\n");
        sb.append("    \"file\": ").append(q(name + ".bin")).append(",\n");
        sb.append("    \"description\": ").append(q(description)).append(",\n");
        sb.append("    \"serializeType\": ").append(q(d.type.name())).append(",\n");
        sb.append("    \"code\": ").append(d.code).append(",\n");
        sb.append("    \"language\": ").append(q(d.language)).append(",\n");
        sb.append("    \"version\": ").append(d.version).append(",\n");
        sb.append("    \"opaque\": ").append(d.opaque).append(",\n");
        sb.append("    \"flag\": ").append(d.flag).append(",\n");
        sb.append("    \"remark\": ").append(d.remark == null ? "null" : q(d.remark)).append(",\n");
        sb.append("    \"extFields\": ");
        if (d.extFields == null) {
            sb.append("null");
        } else if (d.extFields.isEmpty()) {
            sb.append("{}");
        } else {
            sb.append("{");
            boolean first = true;
            for (Map.Entry<String, String> e : d.extFields.entrySet()) {
                sb.append(first ? "\n" : ",\n");
                first = false;
                sb.append("      ").append(q(e.getKey())).append(": ").append(q(e.getValue()));
            }
            sb.append("\n    }");
        }
        sb.append(",\n");
        sb.append("    \"bodyHex\": ").append(d.body == null ? "null" : q(hex(d.body))).append(",\n");
        sb.append("    \"javaReencodeIdentical\": ").append(javaReencodeIdentical).append("\n");
        sb.append("  }");
    }

    /** JSON string literal; escapes quote, backslash, C0 controls, DEL and U+2028/U+2029; other text stays UTF-8. */
    private static String q(String s) {
        StringBuilder sb = new StringBuilder("\"");
        for (int i = 0; i < s.length(); i++) {
            char c = s.charAt(i);
            switch (c) {
                case '"':
                    sb.append("\\\"");
                    break;
                case '\\':
                    sb.append("\\\\");
                    break;
                case '\n':
                    sb.append("\\n");
                    break;
                case '\r':
                    sb.append("\\r");
                    break;
                case '\t':
                    sb.append("\\t");
                    break;
                default:
                    if (c < 0x20 || c == 0x7f || c == '\u2028' || c == '\u2029') {
                        sb.append(String.format("\\u%04x", (int) c));
                    } else {
                        sb.append(c);
                    }
            }
        }
        return sb.append('"').toString();
    }

    private static String hex(byte[] a) {
        StringBuilder sb = new StringBuilder(a.length * 2);
        for (byte x : a) {
            sb.append(Character.forDigit((x >> 4) & 0xF, 16)).append(Character.forDigit(x & 0xF, 16));
        }
        return sb.toString();
    }

    // ------------------------------------------------------------------------------------------------
    // Reflection helpers (class locations differ between 4.9.x and 5.x)

    private static Class<?> optionalClass(String name) {
        try {
            return Class.forName(name);
        } catch (ClassNotFoundException e) {
            return null;
        }
    }

    @SuppressWarnings("unchecked")
    private static Class<? extends CommandCustomHeader> headerClass(String simpleName) {
        for (String p : HEADER_PACKAGES) {
            Class<?> c = optionalClass(p + simpleName);
            if (c != null) {
                return (Class<? extends CommandCustomHeader>) c;
            }
        }
        throw new IllegalStateException("header class not found: " + simpleName);
    }

    private static Object header(String simpleName) throws Exception {
        return headerClass(simpleName).getDeclaredConstructor().newInstance();
    }

    private static int staticInt(String[] classes, String field) {
        for (String cn : classes) {
            Class<?> c = optionalClass(cn);
            if (c != null) {
                try {
                    Field f = c.getField(field);
                    return f.getInt(null);
                } catch (ReflectiveOperationException e) {
                    throw new IllegalStateException(cn + "." + field, e);
                }
            }
        }
        throw new IllegalStateException("no class for " + field);
    }

    private static int requestCode(String name) {
        return staticInt(REQUEST_CODE_CLASSES, name);
    }

    private static int responseCode(String name) {
        return staticInt(RESPONSE_CODE_CLASSES, name);
    }

    /** Calls the one-argument public method {@code setter} on {@code target}. */
    private static void set(Object target, String setter, Object value) throws Exception {
        Method found = null;
        for (Method m : target.getClass().getMethods()) {
            if (m.getName().equals(setter) && m.getParameterCount() == 1) {
                if (found != null) {
                    throw new IllegalStateException("ambiguous setter " + setter + " on " + target.getClass());
                }
                found = m;
            }
        }
        if (found == null) {
            throw new IllegalStateException("no setter " + setter + " on " + target.getClass());
        }
        found.invoke(target, value);
    }

    private GoldenVectors() {
    }
}
