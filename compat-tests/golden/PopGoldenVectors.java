/*
 * Golden vectors for the 5.x pop data formats (Java 5.3.3 only: 4.9.x has no pop).
 *
 * Serializes fixed PopCheckPoint, AckMsg and BatchAckMsg values with the real store classes and the fastjson
 * the broker uses (com.alibaba.fastjson.JSON.toJSONString, as PopMessageProcessor and AckMessageProcessor do),
 * builds receipt handles (extraInfo) and the other pop strings with the real ExtraInfoUtil, KeyBuilder,
 * PopAckConstants and PopMessageProcessor helpers, and persists the two pop config files through their managers'
 * own encode(true) (ConfigManager.persist's format), in map-hash order and with the maps sorted.
 *
 * Usage: java -cp <rocketmq-broker 5.3.3 classpath>:<classes> PopGoldenVectors <out-dir>
 * Writes <out>/<name>.json (exact bytes, no newline at the end) and <out>/strings.txt (one "name<TAB>value" a line).
 */

import com.alibaba.fastjson.JSON;
import com.alibaba.fastjson.serializer.SerializerFeature;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.broker.loadbalance.MessageRequestModeManager;
import org.apache.rocketmq.broker.offset.ConsumerOrderInfoManager;
import org.apache.rocketmq.broker.processor.PopMessageProcessor;
import org.apache.rocketmq.common.KeyBuilder;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.PopAckConstants;
import org.apache.rocketmq.common.message.MessageConst;
import org.apache.rocketmq.common.message.MessageRequestMode;
import org.apache.rocketmq.remoting.protocol.body.SetMessageRequestModeRequestBody;
import org.apache.rocketmq.remoting.protocol.header.ExtraInfoUtil;
import org.apache.rocketmq.store.pop.AckMsg;
import org.apache.rocketmq.store.pop.BatchAckMsg;
import org.apache.rocketmq.store.pop.PopCheckPoint;

public final class PopGoldenVectors {
    static final String WEIRD = "g\"\\/\u00fc\u20ac\ud83d\ude00\u007f\u2028";

    static PopCheckPoint ck(long so, long pt, long it, int bm, int n, int q, String t, String c, long ro,
        List<Integer> diffs, String bn, String rp) {
        PopCheckPoint ck = new PopCheckPoint();
        ck.setStartOffset(so);
        ck.setPopTime(pt);
        ck.setInvisibleTime(it);
        ck.setBitMap(bm);
        ck.setNum((byte) n);
        ck.setQueueId(q);
        ck.setTopic(t);
        ck.setCId(c);
        ck.setReviveOffset(ro);
        if (diffs != null) {
            for (int d : diffs) {
                ck.addDiff(d);
            }
        }
        ck.setBrokerName(bn);
        ck.setRePutTimes(rp);
        return ck;
    }

    static <T extends AckMsg> T ack(T a, long ao, long so, String c, String t, int q, long pt, String bn) {
        a.setAckOffset(ao);
        a.setStartOffset(so);
        a.setConsumerGroup(c);
        a.setTopic(t);
        a.setQueueId(q);
        a.setPopTime(pt);
        a.setBrokerName(bn);
        return a;
    }

    static SetMessageRequestModeRequestBody mode(String topic, String group, MessageRequestMode mode, int share) {
        SetMessageRequestModeRequestBody b = new SetMessageRequestModeRequestBody();
        b.setTopic(topic);
        b.setConsumerGroup(group);
        if (mode != null) {
            b.setMode(mode);
        }
        b.setPopShareQueueNum(share);
        return b;
    }

    public static void main(String[] args) throws Exception {
        Path out = Paths.get(args[0]);
        Files.createDirectories(out);
        Map<String, String> files = new LinkedHashMap<>();
        Map<String, String> strings = new LinkedHashMap<>();

        PopCheckPoint ckA = ck(1024, 1700000000123L, 60000, 5, 3, 2, "TopicTest", "group-a", 77,
            Arrays.asList(0, 2, 5), "broker-a", null);
        PopCheckPoint ckB = ck(0, 1, 2, Integer.MIN_VALUE | 1, 32, 0, "%RETRY%group-b_TopicTest", "group-b", 0,
            null, null, "3");
        PopCheckPoint ckC = ck(Long.MAX_VALUE - 5, -1, Long.MIN_VALUE, -1, -128, Integer.MAX_VALUE, "%RETRY%g+t",
            WEIRD, -9, Arrays.asList(0, Integer.MAX_VALUE, -3), WEIRD, "x");
        files.put("checkpoint", JSON.toJSONString(ckA));
        files.put("checkpoint_old", JSON.toJSONString(ckB));
        files.put("checkpoint_extremes", JSON.toJSONString(ckC));
        // What the revive service reads back from the stored body, re-encoded.
        files.put("checkpoint_reparsed", JSON.toJSONString(JSON.parseObject(files.get("checkpoint"), PopCheckPoint.class)));

        AckMsg ackA = ack(new AckMsg(), 1029, 1024, "group-a", "TopicTest", 2, 1700000000123L, "broker-a");
        AckMsg ackB = ack(new AckMsg(), 0, 0, "group-b", "%RETRY%group-b_TopicTest", 0, 0, null);
        files.put("ack", JSON.toJSONString(ackA));
        files.put("ack_no_broker", JSON.toJSONString(ackB));
        String longNames = "{\"ackOffset\":5,\"startOffset\":3,\"consumerGroup\":\"g\",\"topic\":\"t\",\"queueId\":1,"
            + "\"popTime\":9,\"brokerName\":\"b\"}";
        files.put("ack_long_names_input", longNames);
        files.put("ack_long_names_reparsed", JSON.toJSONString(JSON.parseObject(longNames, AckMsg.class)));

        BatchAckMsg bA = ack(new BatchAckMsg(), -1, 1024, "group-a", "TopicTest", 2, 1700000000123L, "broker-a");
        bA.getAckOffsetList().addAll(Arrays.asList(1024L, 1026L, 1029L));
        BatchAckMsg bB = ack(new BatchAckMsg(), 0, 7, WEIRD, "TopicTest", 1, 5, null);
        bB.getAckOffsetList().add(7L);
        files.put("batch_ack", JSON.toJSONString(bA));
        files.put("batch_ack_merged", JSON.toJSONString(bB));
        files.put("batch_ack_empty", JSON.toJSONString(new BatchAckMsg()));
        files.put("batch_ack_reparsed", JSON.toJSONString(JSON.parseObject(files.get("batch_ack"), BatchAckMsg.class)));

        // Receipt handles and the pop response's offset infos.
        strings.put("extra_info_7", ExtraInfoUtil.buildExtraInfo(1024, 1700000000123L, 60000, 3, "TopicTest", "broker-a", 2));
        strings.put("extra_info_8_v1", ExtraInfoUtil.buildExtraInfo(1024, 1700000000123L, 60000, 3,
            "%RETRY%group-a_TopicTest", "broker-a", 2, 1029));
        strings.put("extra_info_8_v2", ExtraInfoUtil.buildExtraInfo(1024, 1700000000123L, 60000, 3,
            "%RETRY%group-a+TopicTest", "broker-a", 2, 1029));
        strings.put("extra_info_order", ExtraInfoUtil.buildExtraInfo(-1, 0, 0, KeyBuilder.POP_ORDER_REVIVE_QUEUE,
            "TopicTest", "broker-a", 0, 0));
        StringBuilder so = new StringBuilder();
        ExtraInfoUtil.buildStartOffsetInfo(so, "TopicTest", 2, 1024);
        ExtraInfoUtil.buildStartOffsetInfo(so, "%RETRY%group-a_TopicTest", 0, 5);
        ExtraInfoUtil.buildStartOffsetInfo(so, "%RETRY%group-a+TopicTest", 1, 0);
        strings.put("start_offset_info", so.toString());
        strings.put("start_offset_info_parsed", new TreeMap<>(ExtraInfoUtil.parseStartOffsetInfo(so.toString())).toString());
        StringBuilder mo = new StringBuilder();
        ExtraInfoUtil.buildMsgOffsetInfo(mo, "TopicTest", 2, Arrays.asList(1024L, 1026L, 1029L));
        ExtraInfoUtil.buildMsgOffsetInfo(mo, "%RETRY%group-a_TopicTest", 0, Arrays.asList(5L));
        strings.put("msg_offset_info", mo.toString());
        strings.put("msg_offset_info_parsed", new TreeMap<>(ExtraInfoUtil.parseMsgOffsetInfo(mo.toString())).toString());
        StringBuilder oc = new StringBuilder();
        ExtraInfoUtil.buildQueueIdOrderCountInfo(oc, "TopicTest", 2, 3);
        ExtraInfoUtil.buildQueueIdOrderCountInfo(oc, "%RETRY%group-a_TopicTest", 0, 0);
        strings.put("order_count_info", oc.toString());
        strings.put("order_count_info_parsed", new TreeMap<>(ExtraInfoUtil.parseOrderCountInfo(oc.toString())).toString());
        StringBuilder qoc = new StringBuilder();
        ExtraInfoUtil.buildQueueOffsetOrderCountInfo(qoc, "TopicTest", 2, 1024, 1);
        ExtraInfoUtil.buildQueueOffsetOrderCountInfo(qoc, "%RETRY%group-a+TopicTest", 0, 7, 4);
        strings.put("queue_offset_order_count_info", qoc.toString());
        strings.put("queue_offset_order_count_info_parsed",
            new TreeMap<>(ExtraInfoUtil.parseOrderCountInfo(qoc.toString())).toString());
        strings.put("start_offset_info_map_key", ExtraInfoUtil.getStartOffsetInfoMapKey("%RETRY%group-a_TopicTest", 2));
        strings.put("start_offset_info_map_key_ck", ExtraInfoUtil.getStartOffsetInfoMapKey("TopicTest",
            strings.get("extra_info_8_v2"), 2));
        strings.put("queue_offset_map_key", ExtraInfoUtil.getQueueOffsetMapKey("%RETRY%group-a+TopicTest", 2, 1029));

        // Names.
        strings.put("retry_topic_v1", KeyBuilder.buildPopRetryTopic("TopicTest", "group-a", false));
        strings.put("retry_topic_v2", KeyBuilder.buildPopRetryTopic("TopicTest", "group-a", true));
        strings.put("parse_normal_topic_v1", KeyBuilder.parseNormalTopic("%RETRY%group-a_TopicTest", "group-a"));
        strings.put("parse_normal_topic_v2", KeyBuilder.parseNormalTopic("%RETRY%group-a+TopicTest", "group-a"));
        strings.put("parse_normal_topic_plain", KeyBuilder.parseNormalTopic("TopicTest", "group-a"));
        strings.put("parse_normal_topic_1arg_v2", KeyBuilder.parseNormalTopic("%RETRY%group-a+TopicTest"));
        strings.put("parse_normal_topic_1arg_v1", KeyBuilder.parseNormalTopic("%RETRY%group-a_TopicTest"));
        strings.put("parse_group_v2", KeyBuilder.parseGroup("%RETRY%group-a+TopicTest"));
        strings.put("parse_group_v1", KeyBuilder.parseGroup("%RETRY%group-a_TopicTest"));
        strings.put("revive_topic", PopAckConstants.buildClusterReviveTopic("DefaultCluster"));
        strings.put("revive_group", PopAckConstants.REVIVE_GROUP);
        strings.put("polling_key", KeyBuilder.buildPollingKey("TopicTest", "group-a", 2));
        strings.put("ck_unique_id", PopMessageProcessor.genCkUniqueId(ckA));
        strings.put("ck_unique_id_old", PopMessageProcessor.genCkUniqueId(ckB));
        strings.put("ack_unique_id", PopMessageProcessor.genAckUniqueId(ackA));
        strings.put("ack_unique_id_no_broker", PopMessageProcessor.genAckUniqueId(ackB));
        strings.put("batch_ack_unique_id", PopMessageProcessor.genBatchAckUniqueId(bA));
        strings.put("batch_ack_unique_id_empty", PopMessageProcessor.genBatchAckUniqueId(new BatchAckMsg()));
        strings.put("property_timer_deliver_ms", MessageConst.PROPERTY_TIMER_DELIVER_MS);
        strings.put("property_uniq_key", MessageConst.PROPERTY_UNIQ_CLIENT_MESSAGE_ID_KEYIDX);
        strings.put("property_pop_ck", MessageConst.PROPERTY_POP_CK);
        strings.put("ck_tag", PopAckConstants.CK_TAG);
        strings.put("ack_tag", PopAckConstants.ACK_TAG);
        strings.put("batch_ack_tag", PopAckConstants.BATCH_ACK_TAG);
        strings.put("retry_prefix", MixAll.RETRY_GROUP_TOPIC_PREFIX);

        // config/consumerOrderInfo.json
        ConsumerOrderInfoManager orders = new ConsumerOrderInfoManager();
        ConcurrentHashMap<String, ConcurrentHashMap<Integer, ConsumerOrderInfoManager.OrderInfo>> table = new ConcurrentHashMap<>();
        ConcurrentHashMap<Integer, ConsumerOrderInfoManager.OrderInfo> qs = new ConcurrentHashMap<>();
        ConsumerOrderInfoManager.OrderInfo o0 = new ConsumerOrderInfoManager.OrderInfo("attempt-1", 1700000000123L, 60000,
            Arrays.asList(100L, 101L, 105L), 1700000000200L, 2);
        o0.updateOffsetNextVisibleTime(105, 1700000090000L);
        o0.updateOffsetNextVisibleTime(100, 1700000080000L);
        Map<Long, Integer> counts = new HashMap<>();
        counts.put(100L, 2);
        counts.put(101L, 1);
        o0.setOffsetConsumedCount(counts);
        qs.put(0, o0);
        ConsumerOrderInfoManager.OrderInfo o1 = new ConsumerOrderInfoManager.OrderInfo(null, 5, 30000,
            Arrays.asList(7L), 6, 0);
        qs.put(17, o1);
        // A separate object: fastjson writes {"$ref":...} for an object it has already written.
        qs.put(3, new ConsumerOrderInfoManager.OrderInfo("a", 8, 0, Arrays.asList(9L, 10L), 0, -1L));
        table.put("TopicTest@group-a", qs);
        ConcurrentHashMap<Integer, ConsumerOrderInfoManager.OrderInfo> qs2 = new ConcurrentHashMap<>();
        ConsumerOrderInfoManager.OrderInfo o2 = new ConsumerOrderInfoManager.OrderInfo();
        o2.setPopTime(9);
        qs2.put(0, o2);
        table.put("%RETRY%group-a_TopicTest@group-a", qs2);
        table.put("OrderTopic@group-b", new ConcurrentHashMap<>());
        orders.setTable(table);
        files.put("consumerOrderInfo", orders.encode(true));
        files.put("consumerOrderInfo.sorted", JSON.toJSONString(orders, SerializerFeature.PrettyFormat, SerializerFeature.MapSortField));
        files.put("consumerOrderInfo.compact", orders.encode(false));
        files.put("consumerOrderInfo.empty", new ConsumerOrderInfoManager().encode(true));

        // config/messageRequestMode.json
        MessageRequestModeManager modes = new MessageRequestModeManager();
        modes.setMessageRequestMode("TopicTest", "group-a", mode("TopicTest", "group-a", MessageRequestMode.POP, 2));
        modes.setMessageRequestMode("TopicTest", "group-b", mode("TopicTest", "group-b", null, 0));
        modes.setMessageRequestMode("OrderTopic", "group-a", mode("OrderTopic", "group-a", MessageRequestMode.POP, 0));
        files.put("messageRequestMode", modes.encode(true));
        files.put("messageRequestMode.sorted", JSON.toJSONString(modes, SerializerFeature.PrettyFormat, SerializerFeature.MapSortField));
        files.put("messageRequestMode.compact", modes.encode(false));
        files.put("messageRequestMode.empty", new MessageRequestModeManager().encode(true));

        // Round trip: what Java loads from its own files.
        ConsumerOrderInfoManager back = new ConsumerOrderInfoManager();
        back.decode(files.get("consumerOrderInfo"));
        if (!JSON.toJSONString(back, SerializerFeature.PrettyFormat, SerializerFeature.MapSortField).equals(files.get("consumerOrderInfo.sorted"))) {
            throw new IllegalStateException("consumerOrderInfo does not round-trip in Java");
        }

        for (Map.Entry<String, String> f : files.entrySet()) {
            Files.write(out.resolve(f.getKey() + ".json"), f.getValue().getBytes(StandardCharsets.UTF_8));
        }
        StringBuilder lines = new StringBuilder();
        for (Map.Entry<String, String> s : strings.entrySet()) {
            if (s.getValue().indexOf('\t') >= 0 || s.getValue().indexOf('\n') >= 0) {
                throw new IllegalStateException("string vector " + s.getKey() + " holds a tab or newline");
            }
            lines.append(s.getKey()).append('\t').append(s.getValue()).append('\n');
        }
        Files.write(out.resolve("strings.txt"), lines.toString().getBytes(StandardCharsets.UTF_8));
    }
}
