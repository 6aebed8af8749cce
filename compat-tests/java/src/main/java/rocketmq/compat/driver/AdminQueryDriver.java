package rocketmq.compat.driver;

import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.UUID;
import java.util.stream.Collectors;
import org.apache.rocketmq.client.QueryResult;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.tools.admin.DefaultMQAdminExt;

/**
 * Child-JVM driver for message queries through the official admin client ({@code DefaultMQAdminExt} of
 * rocketmq-tools; compiled against 4.9.7, run with a 4.9.7 or 5.x tools classpath).
 * Usage: {@code AdminQueryDriver <namesrvAddr> <topic>}.
 *
 * <p>Sends 20 messages, each with its own key and a key shared by all, then: {@code queryMessage} by
 * each own key finds exactly that message (QUERY_MESSAGE), by the shared key all 20, in a time window
 * that ended before the sends none; {@code viewMessage(topic, offsetMsgId)} (VIEW_MESSAGE_BY_ID) and
 * {@code viewMessage(topic, uniqueMsgId)} (tried as an offset id, then QUERY_MESSAGE by unique key)
 * return the message; with 4.9.x also {@code viewMessage(offsetMsgId)}; an offset id past the end of the
 * commit log is refused. Prints {@code RESULT step=adminQuery status=OK|FAILED ... [reason=...]}.
 */
public final class AdminQueryDriver {
    private static final int COUNT = 20;
    private static final long INDEX_WAIT_MS = 15_000;

    private AdminQueryDriver() {
    }

    record Sent(String key, String body, String msgId, String offsetMsgId, int queueId, long queueOffset) {
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 2) {
            System.err.println("usage: AdminQueryDriver <namesrvAddr> <topic>");
            System.exit(2);
        }
        String namesrv = args[0];
        String topic = args[1];
        String runId = UUID.randomUUID().toString().substring(0, 8);
        Steps.printClient(runId);
        boolean ok = Steps.report("adminQuery", facts -> run(namesrv, topic, runId, facts));
        System.exit(ok ? 0 : 1);
    }

    private static void run(String namesrv, String topic, String runId, Map<String, Object> facts) throws Exception {
        String shared = runId + "-shared";
        long beforeSends = System.currentTimeMillis();
        List<Sent> sent = new ArrayList<>();
        DefaultMQProducer producer = FeatureDriver.newProducer(namesrv, "admin_query_producer_" + runId, "admin-query-producer-" + runId);
        producer.start();
        try {
            for (int i = 0; i < COUNT; i++) {
                String key = runId + "-q-" + i;
                String body = "query me " + key;
                Message msg = new Message(topic, "TagQ", key + " " + shared, body.getBytes(StandardCharsets.UTF_8));
                SendResult r = producer.send(msg);
                Steps.check(r.getSendStatus() == SendStatus.SEND_OK, "send " + i + ": " + r);
                sent.add(new Sent(key, body, r.getMsgId(), r.getOffsetMsgId(), r.getMessageQueue().getQueueId(), r.getQueueOffset()));
            }
        } finally {
            producer.shutdown();
        }

        DefaultMQAdminExt admin = new DefaultMQAdminExt();
        admin.setNamesrvAddr(namesrv);
        admin.setInstanceName("admin-query-" + runId);
        admin.start();
        try {
            // by each message's own key (the index is built asynchronously: retry for a while)
            for (Sent s : List.of(sent.get(0), sent.get(7), sent.get(COUNT - 1))) {
                List<MessageExt> found = queryUntilFound(admin, topic, s.key(), 32, 0, Long.MAX_VALUE);
                Steps.check(found.size() == 1, "queryMessage(" + s.key() + ") found " + found.size() + " messages: " + ids(found));
                checkSame(s, found.get(0), "queryMessage(" + s.key() + ")");
            }
            // by the key all of them carry
            List<MessageExt> all = queryUntilFound(admin, topic, shared, 64, 0, Long.MAX_VALUE);
            facts.put("sharedKeyHits", all.size());
            Steps.check(all.size() == COUNT, "queryMessage(shared key, max 64) found " + all.size() + ", want " + COUNT);
            // in a window that ended before the sends
            try {
                QueryResult none = admin.queryMessage(topic, shared, 32, 0, beforeSends - 60_000);
                Steps.check(none.getMessageList().isEmpty(), "queryMessage over a window before the sends found "
                    + none.getMessageList().size() + " messages");
            } catch (MQClientException e) {
                facts.put("emptyWindowCode", e.getResponseCode());
            }

            for (Sent s : List.of(sent.get(3), sent.get(COUNT - 2))) {
                checkSame(s, admin.viewMessage(topic, s.offsetMsgId()), "viewMessage(topic, offsetMsgId " + s.offsetMsgId() + ")");
                checkSame(s, admin.viewMessage(topic, s.msgId()), "viewMessage(topic, msgId " + s.msgId() + ")");
                Method byOffsetId = oneArgViewMessage();
                if (byOffsetId != null) {
                    checkSame(s, (MessageExt) byOffsetId.invoke(admin, s.offsetMsgId()), "viewMessage(offsetMsgId " + s.offsetMsgId() + ")");
                    facts.put("viewMessageOneArg", "checked");
                }
            }

            // an offset message id of this broker, but far past the end of its commit log
            String real = sent.get(0).offsetMsgId();
            String beyond = real.substring(0, real.length() - 16) + "000000FFFFFF0000";
            try {
                MessageExt m = admin.viewMessage(topic, beyond);
                throw new Steps.Failure("viewMessage of offset id " + beyond + " (past the commit log end) returned "
                    + (m == null ? "null" : m.getKeys()));
            } catch (MQBrokerException e) {
                facts.put("pastEndCode", e.getResponseCode());
            } catch (MQClientException e) {
                facts.put("pastEndClientCode", e.getResponseCode());
            }
        } finally {
            admin.shutdown();
        }
    }

    /** {@code viewMessage(String offsetMsgId)}: 4.9.x has it, 5.x removed it. */
    private static Method oneArgViewMessage() {
        try {
            return DefaultMQAdminExt.class.getMethod("viewMessage", String.class);
        } catch (NoSuchMethodException e) {
            return null;
        }
    }

    private static List<MessageExt> queryUntilFound(DefaultMQAdminExt admin, String topic, String key, int max, long begin,
                                                    long end) throws Exception {
        long deadline = System.currentTimeMillis() + INDEX_WAIT_MS;
        Exception last = null;
        while (System.currentTimeMillis() < deadline) {
            try {
                List<MessageExt> found = admin.queryMessage(topic, key, max, begin, end).getMessageList();
                if (!found.isEmpty()) {
                    return found;
                }
            } catch (MQClientException e) {
                last = e;
            }
            Thread.sleep(300);
        }
        throw new Steps.Failure("queryMessage(" + topic + ", " + key + ") found nothing within " + INDEX_WAIT_MS
            + " ms; last error: " + last);
    }

    private static String ids(List<MessageExt> found) {
        return found.stream().map(m -> m.getKeys() + "@" + m.getQueueId() + ":" + m.getQueueOffset()).collect(Collectors.joining(","));
    }

    private static void checkSame(Sent s, MessageExt m, String what) throws Steps.Failure {
        Steps.check(m != null, what + " returned null");
        String body = new String(m.getBody(), StandardCharsets.UTF_8);
        Steps.check(body.equals(s.body()), what + ": body '" + body + "', want '" + s.body() + "'");
        Steps.check(m.getKeys() != null && m.getKeys().startsWith(s.key() + " "), what + ": keys '" + m.getKeys() + "'");
        String idProblem = FeatureDriver.idProblem(s.msgId(), s.offsetMsgId(), m);
        Steps.check(idProblem == null, what + ": " + idProblem);
        Steps.check(s.queueId() == m.getQueueId() && s.queueOffset() == m.getQueueOffset(), what + ": queue "
            + m.getQueueId() + " offset " + m.getQueueOffset() + ", want " + s.queueId() + " " + s.queueOffset());
        Steps.check("TagQ".equals(m.getTags()), what + ": tag " + m.getTags());
    }
}
