package rocketmq.compat.namesrv;

import java.util.List;
import java.util.Map;
import java.util.Properties;
import org.apache.rocketmq.client.ClientConfig;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.common.protocol.body.ClusterInfo;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;

/**
 * Asks the name server things in-process, through the official 4.9.7 client's {@link MQClientAPIImpl}
 * (JSON headers): the checks that mqadmin has no command for, and the polls that must be fast.
 */
public final class NamesrvProbe implements AutoCloseable {
    private static final long TIMEOUT_MILLIS = 3000;

    private final String address;
    private final MQClientAPIImpl api;

    private NamesrvProbe(String address, MQClientAPIImpl api) {
        this.address = address;
        this.api = api;
    }

    public static NamesrvProbe connect(String namesrvAddress) {
        ClientConfig clientConfig = new ClientConfig();
        clientConfig.setNamesrvAddr(namesrvAddress);
        MQClientAPIImpl api = new MQClientAPIImpl(new NettyClientConfig(), null, null, clientConfig);
        api.start();
        api.updateNameServerAddressList(namesrvAddress);
        return new NamesrvProbe(namesrvAddress, api);
    }

    /** GET_BROKER_CLUSTER_INFO (106). */
    public ClusterInfo clusterInfo() throws Exception {
        return api.getBrokerClusterInfo(TIMEOUT_MILLIS);
    }

    /** GET_ROUTEINFO_BY_TOPIC (105); an unknown topic throws {@link MQClientException} with code 17. */
    public TopicRouteData route(String topic) throws Exception {
        return api.getTopicRouteInfoFromNameServer(topic, TIMEOUT_MILLIS);
    }

    /** GET_KV_CONFIG (101); a missing key throws {@link MQClientException} with code 22. */
    public String kvConfig(String namespace, String key) throws Exception {
        return api.getKVConfigValue(namespace, key, TIMEOUT_MILLIS);
    }

    /** GET_NAMESRV_CONFIG (319). */
    public Properties config() throws Exception {
        Map<String, Properties> all = api.getNameServerConfig(List.of(address), TIMEOUT_MILLIS);
        return all.get(address);
    }

    /** UPDATE_NAMESRV_CONFIG (318) of one key. */
    public void updateConfig(String key, String value) throws Exception {
        Properties properties = new Properties();
        properties.setProperty(key, value);
        api.updateNameServerConfig(properties, List.of(address), TIMEOUT_MILLIS);
    }

    /** The response code of a failed call, or -1 if it did not fail with a server-side code. */
    public static int responseCode(Exception e) {
        return e instanceof MQClientException ? ((MQClientException) e).getResponseCode() : -1;
    }

    @Override
    public void close() {
        api.shutdown();
    }
}
