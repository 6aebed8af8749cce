package rocketmq.compat.broker;

import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.header.QueryConsumerOffsetRequestHeader;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;

/**
 * Asks a broker things in-process, through the official 4.9.7 client's {@link MQClientAPIImpl} (JSON
 * headers): committed consumer offsets (QUERY_CONSUMER_OFFSET) and queue ends (GET_MAX_OFFSET).
 * It reconnects by itself after the broker restarted.
 */
public final class BrokerProbe implements AutoCloseable {
    private static final long TIMEOUT_MILLIS = 3000;
    /** QUERY_NOT_FOUND: the group has no offset for the queue. */
    private static final int QUERY_NOT_FOUND = 22;

    private final String brokerAddress;
    private final String brokerName;
    private final MQClientAPIImpl api;

    private BrokerProbe(String brokerAddress, String brokerName, MQClientAPIImpl api) {
        this.brokerAddress = brokerAddress;
        this.brokerName = brokerName;
        this.api = api;
    }

    public static BrokerProbe connect(String brokerAddress, String brokerName) {
        MQClientAPIImpl api = new MQClientAPIImpl(new NettyClientConfig(), null, null, new ClientConfig());
        api.start();
        return new BrokerProbe(brokerAddress, brokerName, api);
    }

    /** The group's committed offset of one queue, or -1 if it has none (QUERY_NOT_FOUND). */
    public long committedOffset(String group, String topic, int queueId) throws Exception {
        QueryConsumerOffsetRequestHeader header = new QueryConsumerOffsetRequestHeader();
        header.setConsumerGroup(group);
        header.setTopic(topic);
        header.setQueueId(queueId);
        try {
            return api.queryConsumerOffset(brokerAddress, header, TIMEOUT_MILLIS);
        } catch (MQBrokerException e) {
            if (e.getResponseCode() == QUERY_NOT_FOUND) {
                return -1;
            }
            throw e;
        }
    }

    /** GET_BROKER_RUNTIME_INFO, the table the broker answers. */
    public java.util.Map<String, String> runtimeInfo() throws Exception {
        return api.getBrokerRuntimeInfo(brokerAddress, TIMEOUT_MILLIS).getTable();
    }

    /** The runtime info's {@code commitLogMaxOffset}: the end of the readable commit log. */
    public long commitLogMaxOffset() throws Exception {
        return Long.parseLong(runtimeInfo().get("commitLogMaxOffset"));
    }

    /** The runtime info's {@code dispatchBehindBytes}: commit-log bytes not yet in the consume queues. */
    public long dispatchBehindBytes() throws Exception {
        return Long.parseLong(runtimeInfo().get("dispatchBehindBytes"));
    }

    /** UPDATE_AND_CREATE_TOPIC on this broker: {@code queues} read and write queues, read and write permission. */
    public void createTopic(String topic, int queues) throws Exception {
        org.apache.rocketmq.common.TopicConfig config = new org.apache.rocketmq.common.TopicConfig(topic, queues, queues, 6);
        // a 5.x broker that just started can take a few seconds to answer this on a busy machine
        api.createTopic(brokerAddress, "TBW102", config, 15_000);
    }

    /**
     * UPDATE_AND_CREATE_TOPIC with 5.x attributes ({@code +message.type=FIFO}: what {@code mqadmin updateTopic -a}
     * sends in the header's {@code attributes} field, which the 4.9.7 header lacks, so it is added by name).
     */
    public void createTopic(String topic, int queues, String attributes) throws Exception {
        org.apache.rocketmq.common.protocol.header.CreateTopicRequestHeader header =
            new org.apache.rocketmq.common.protocol.header.CreateTopicRequestHeader();
        header.setTopic(topic);
        header.setDefaultTopic("TBW102");
        header.setReadQueueNums(queues);
        header.setWriteQueueNums(queues);
        header.setPerm(6);
        header.setTopicFilterType("SINGLE_TAG");
        header.setTopicSysFlag(0);
        header.setOrder(false);
        org.apache.rocketmq.remoting.protocol.RemotingCommand request =
            org.apache.rocketmq.remoting.protocol.RemotingCommand.createRequestCommand(
                org.apache.rocketmq.common.protocol.RequestCode.UPDATE_AND_CREATE_TOPIC, header);
        request.addExtField("attributes", attributes);
        expectSuccess("create topic " + topic + " " + attributes,
            api.getRemotingClient().invokeSync(brokerAddress, request, 15_000));
    }

    /**
     * UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with a body written by hand, for 5.x members the 4.9.7 class lacks
     * ({@code consumeMessageOrderly}: a FIFO group of 5.x clients).
     */
    public void createGroup(String group, boolean consumeMessageOrderly) throws Exception {
        org.apache.rocketmq.remoting.protocol.RemotingCommand request =
            org.apache.rocketmq.remoting.protocol.RemotingCommand.createRequestCommand(
                org.apache.rocketmq.common.protocol.RequestCode.UPDATE_AND_CREATE_SUBSCRIPTIONGROUP, null);
        request.setBody(("{\"groupName\":\"" + group + "\",\"consumeEnable\":true,\"consumeFromMinEnable\":true,"
            + "\"consumeBroadcastEnable\":true,\"consumeMessageOrderly\":" + consumeMessageOrderly + ","
            + "\"retryQueueNums\":1,\"retryMaxTimes\":16,\"brokerId\":0,\"whichBrokerWhenConsumeSlowly\":1,"
            + "\"notifyConsumerIdsChangedEnable\":true}").getBytes(java.nio.charset.StandardCharsets.UTF_8));
        expectSuccess("create group " + group, api.getRemotingClient().invokeSync(brokerAddress, request, 15_000));
    }

    private static void expectSuccess(String what, org.apache.rocketmq.remoting.protocol.RemotingCommand response) {
        if (response.getCode() != 0) {
            throw new IllegalStateException(what + ": code " + response.getCode() + " " + response.getRemark());
        }
    }

    /** UPDATE_CONSUMER_OFFSET: the group's committed offset of one queue. */
    public void commitOffset(String group, String topic, int queueId, long offset) throws Exception {
        org.apache.rocketmq.common.protocol.header.UpdateConsumerOffsetRequestHeader header =
            new org.apache.rocketmq.common.protocol.header.UpdateConsumerOffsetRequestHeader();
        header.setConsumerGroup(group);
        header.setTopic(topic);
        header.setQueueId(queueId);
        header.setCommitOffset(offset);
        api.updateConsumerOffset(brokerAddress, header, TIMEOUT_MILLIS);
    }

    /** UPDATE_AND_CREATE_SUBSCRIPTIONGROUP with {@code retryMaxTimes}. */
    public void createGroup(String group, int retryMaxTimes) throws Exception {
        org.apache.rocketmq.common.subscription.SubscriptionGroupConfig config =
            new org.apache.rocketmq.common.subscription.SubscriptionGroupConfig();
        config.setGroupName(group);
        config.setRetryMaxTimes(retryMaxTimes);
        api.createSubscriptionGroup(brokerAddress, config, 15_000);
    }

    /** The group's retryMaxTimes in GET_ALL_SUBSCRIPTIONGROUP_CONFIG, or -1 if it is not there. */
    public int groupRetryMaxTimes(String group) throws Exception {
        org.apache.rocketmq.common.subscription.SubscriptionGroupConfig config =
            api.getAllSubscriptionGroup(brokerAddress, TIMEOUT_MILLIS).getSubscriptionGroupTable().get(group);
        return config == null ? -1 : config.getRetryMaxTimes();
    }

    /** Whether GET_ALL_TOPIC_CONFIG lists {@code topic}. */
    public boolean hasTopic(String topic) throws Exception {
        return api.getAllTopicConfig(brokerAddress, TIMEOUT_MILLIS).getTopicConfigTable().containsKey(topic);
    }

    /** The offset after the last message of one queue. */
    public long maxOffset(String topic, int queueId) throws Exception {
        return api.getMaxOffset(brokerAddress, new MessageQueue(topic, brokerName, queueId), TIMEOUT_MILLIS);
    }

    /**
     * VIEW_BROKER_STATS_DATA (what {@code mqadmin statsAll} reads): the last minute's sum of stats {@code name}
     * for {@code key}, or -1 when the broker has no such item (it counted nothing under it yet).
     */
    public long statsMinuteSum(String name, String key) throws Exception {
        try {
            return api.viewBrokerStatsData(brokerAddress, name, key, TIMEOUT_MILLIS).getStatsMinute().getSum();
        } catch (org.apache.rocketmq.client.exception.MQClientException e) {
            // SYSTEM_ERROR "The stats <NAME> <KEY> not exist"
            if (e.getResponseCode() == 1) {
                return -1;
            }
            throw e;
        }
    }

    /**
     * A request of {@code code} with no header and no body (GET_TIMER_CHECK_POINT, GET_TIMER_METRICS...), answered
     * as the broker answered it: code, remark, ext fields and body.
     */
    public org.apache.rocketmq.remoting.protocol.RemotingCommand request(int code) throws Exception {
        return api.getRemotingClient().invokeSync(brokerAddress,
            org.apache.rocketmq.remoting.protocol.RemotingCommand.createRequestCommand(code, null), TIMEOUT_MILLIS);
    }

    /** A SEND_MESSAGE of {@code body} to queue 0 of {@code topic} (created from TBW102 if new), answered as the broker answered it. */
    public org.apache.rocketmq.remoting.protocol.RemotingCommand send(String topic, byte[] body) throws Exception {
        org.apache.rocketmq.common.protocol.header.SendMessageRequestHeader h = new org.apache.rocketmq.common.protocol.header.SendMessageRequestHeader();
        h.setProducerGroup("probe_producer");
        h.setTopic(topic);
        h.setDefaultTopic("TBW102");
        h.setDefaultTopicQueueNums(4);
        h.setQueueId(0);
        h.setSysFlag(0);
        h.setBornTimestamp(System.currentTimeMillis());
        h.setFlag(0);
        h.setProperties("");
        org.apache.rocketmq.remoting.protocol.RemotingCommand request =
            org.apache.rocketmq.remoting.protocol.RemotingCommand.createRequestCommand(org.apache.rocketmq.common.protocol.RequestCode.SEND_MESSAGE, h);
        request.setBody(body);
        return api.getRemotingClient().invokeSync(brokerAddress, request, TIMEOUT_MILLIS);
    }

    @Override
    public void close() {
        api.shutdown();
    }
}
