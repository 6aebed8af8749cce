package rocketmq.compat.dledger;

import java.nio.ByteBuffer;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.consumer.PullResult;
import org.apache.rocketmq.client.consumer.PullStatus;
import org.apache.rocketmq.client.impl.CommunicationMode;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.impl.consumer.PullResultExt;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.filter.ExpressionType;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.protocol.RequestCode;
import org.apache.rocketmq.common.protocol.ResponseCode;
import org.apache.rocketmq.common.protocol.header.PullMessageRequestHeader;
import org.apache.rocketmq.common.protocol.header.QueryMessageRequestHeader;
import org.apache.rocketmq.common.sysflag.PullSysFlag;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import rocketmq.compat.driver.HaDriver;

/**
 * Reads a broker's messages in-process through the official 4.9.7 client's {@link MQClientAPIImpl} (JSON headers),
 * straight from its address (no name server): every message of a queue from offset 0 (PULL_MESSAGE with a
 * subscription of {@code *}, no suspend, no offset commit) and messages by key (QUERY_MESSAGE, as
 * {@code DefaultMQAdminExt.queryMessage} sends it). It reconnects by itself after the broker restarted.
 */
final class DlbClient implements AutoCloseable {
    private static final long TIMEOUT_MILLIS = 10_000;
    /** The group the whole-queue reads pull as; it never commits an offset. */
    static final String SCAN_GROUP = "dlb_scan_group";

    /** One stored message as a pull returned it: where it is and whether its body is the one its key implies. */
    record Msg(String topic, int queueId, long queueOffset, long commitLogOffset, int storeSize, String key, boolean intact) {
        String where() {
            return key + "@" + topic + "/" + queueId + ":" + queueOffset + " (commit-log offset " + commitLogOffset + ")";
        }
    }

    private final String address;
    private final MQClientAPIImpl api;
    private final ExecutorService pool = Executors.newFixedThreadPool(8, r -> {
        Thread t = new Thread(r, "dlb-query");
        t.setDaemon(true);
        return t;
    });

    private DlbClient(String address, MQClientAPIImpl api) {
        this.address = address;
        this.api = api;
    }

    static DlbClient connect(String address) {
        ClientConfig config = new ClientConfig();
        // QUERY_MESSAGE goes to the VIP port (listenPort - 2) when this is on; ours does not open that port.
        config.setVipChannelEnabled(false);
        MQClientAPIImpl api = new MQClientAPIImpl(new NettyClientConfig(), null, null, config);
        api.start();
        return new DlbClient(address, api);
    }

    static Msg msg(MessageExt m) {
        String key = m.getKeys();
        boolean intact = key != null && Arrays.equals(m.getBody(), HaDriver.body(key));
        return new Msg(m.getTopic(), m.getQueueId(), m.getQueueOffset(), m.getCommitLogOffset(), m.getStoreSize(), key, intact);
    }

    /** One PULL_MESSAGE of up to {@code max} messages from {@code offset}. */
    PullResult pull(String group, String topic, int queueId, long offset, int max) throws Exception {
        PullMessageRequestHeader header = new PullMessageRequestHeader();
        header.setConsumerGroup(group);
        header.setTopic(topic);
        header.setQueueId(queueId);
        header.setQueueOffset(offset);
        header.setMaxMsgNums(max);
        header.setSysFlag(PullSysFlag.buildSysFlag(false, false, true, false));
        header.setCommitOffset(0L);
        header.setSuspendTimeoutMillis(0L);
        header.setSubscription("*");
        header.setSubVersion(0L);
        header.setExpressionType(ExpressionType.TAG);
        return api.pullMessage(address, header, TIMEOUT_MILLIS, CommunicationMode.SYNC, null);
    }

    /**
     * Every message of one queue, pulled from offset 0 until the broker has no more; fails unless the queue
     * offsets run 0, 1, 2, ... without a gap and the last pull's max offset is where the reading stopped.
     */
    List<Msg> pullQueue(String topic, int queueId) throws Exception {
        List<Msg> out = new ArrayList<>();
        long offset = 0;
        for (int pulls = 0; ; pulls++) {
            if (pulls > 100_000) {
                throw new AssertionError("pulling " + topic + "/" + queueId + " from " + address + " does not end");
            }
            PullResult r = pull(SCAN_GROUP, topic, queueId, offset, 32);
            if (r.getPullStatus() == PullStatus.FOUND) {
                List<MessageExt> msgs = MessageDecoder.decodes(ByteBuffer.wrap(((PullResultExt) r).getMessageBinary()));
                for (MessageExt m : msgs) {
                    if (m.getQueueOffset() != offset) {
                        throw new AssertionError("pulling " + topic + "/" + queueId + " from " + address + ": the message after offset "
                            + (offset - 1) + " has queue offset " + m.getQueueOffset() + " (" + m.getKeys() + ")");
                    }
                    out.add(msg(m));
                    offset++;
                }
                if (r.getNextBeginOffset() != offset) {
                    throw new AssertionError("pulling " + topic + "/" + queueId + " from " + address + ": next begin offset "
                        + r.getNextBeginOffset() + " after " + msgs.size() + " messages up to " + offset);
                }
            } else if (r.getPullStatus() == PullStatus.NO_NEW_MSG) {
                if (r.getMaxOffset() != offset) {
                    throw new AssertionError("pulling " + topic + "/" + queueId + " from " + address + ": no new message at "
                        + offset + " but the queue's max offset is " + r.getMaxOffset());
                }
                return out;
            } else {
                throw new AssertionError("pulling " + topic + "/" + queueId + " from " + address + " at offset " + offset
                    + ": " + r.getPullStatus() + " (next begin " + r.getNextBeginOffset() + ", min " + r.getMinOffset() + ", max "
                    + r.getMaxOffset() + ")");
            }
        }
    }

    /** Every message of queues 0 .. queues-1 of {@code topic}. */
    List<Msg> pullTopic(String topic, int queues) throws Exception {
        List<Msg> out = new ArrayList<>();
        for (int q = 0; q < queues; q++) {
            out.addAll(pullQueue(topic, q));
        }
        return out;
    }

    /** QUERY_MESSAGE by key over all time, at most {@code max} hits; none: an empty list (QUERY_NOT_FOUND). */
    List<Msg> queryByKey(String topic, String key, int max) throws Exception {
        QueryMessageRequestHeader header = new QueryMessageRequestHeader();
        header.setTopic(topic);
        header.setKey(key);
        header.setMaxNum(max);
        header.setBeginTimestamp(0L);
        header.setEndTimestamp(Long.MAX_VALUE);
        RemotingCommand request = RemotingCommand.createRequestCommand(RequestCode.QUERY_MESSAGE, header);
        request.addExtField(MixAll.UNIQUE_MSG_QUERY_FLAG, "false");
        RemotingCommand response = api.getRemotingClient().invokeSync(address, request, TIMEOUT_MILLIS);
        if (response.getCode() == ResponseCode.QUERY_NOT_FOUND) {
            return List.of();
        }
        if (response.getCode() != ResponseCode.SUCCESS) {
            throw new AssertionError("QUERY_MESSAGE " + topic + " " + key + " at " + address + ": code " + response.getCode()
                + " " + response.getRemark());
        }
        List<Msg> out = new ArrayList<>();
        for (MessageExt m : MessageDecoder.decodes(ByteBuffer.wrap(response.getBody()))) {
            out.add(msg(m));
        }
        return out;
    }

    /**
     * What {@link #queryEach} found: a description of each message found changed (another offset, size or body),
     * the messages not found at all, and those found more than once (each hit the same message).
     */
    record Queried(List<String> problems, List<Msg> notFound, List<Msg> repeated) {
    }

    /** Queries each of {@code expected} by its key (8 in flight). */
    Queried queryEach(List<Msg> expected) throws Exception {
        List<Future<Object[]>> results = new ArrayList<>();
        for (Msg e : expected) {
            results.add(pool.submit(() -> {
                // The index matches key hashes; the admin client drops hits of another key, and so does this.
                List<Msg> found = queryByKey(e.topic(), e.key(), 32).stream().filter(m -> e.key().equals(m.key())).toList();
                for (Msg f : found) {
                    if (!f.equals(e)) {
                        return new Object[] {"problem", e.where() + ": found " + f};
                    }
                }
                return new Object[] {found.isEmpty() ? "notFound" : found.size() > 1 ? "repeated" : "ok", e};
            }));
        }
        List<String> problems = new ArrayList<>();
        List<Msg> notFound = new ArrayList<>();
        List<Msg> repeated = new ArrayList<>();
        for (Future<Object[]> f : results) {
            Object[] r = f.get();
            switch ((String) r[0]) {
                case "problem" -> problems.add((String) r[1]);
                case "notFound" -> notFound.add((Msg) r[1]);
                case "repeated" -> repeated.add((Msg) r[1]);
                default -> {
                }
            }
        }
        return new Queried(problems, notFound, repeated);
    }

    @Override
    public void close() {
        pool.shutdownNow();
        api.shutdown();
    }
}
