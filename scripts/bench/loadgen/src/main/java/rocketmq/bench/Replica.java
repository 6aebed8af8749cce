package rocketmq.bench;

import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.protocol.body.KVTable;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;

/**
 * The slave of a master/slave pair, seen from the client: its registration with the name server and
 * its commit-log max offset next to the master's ({@code commitLogMaxOffset} of GET_BROKER_RUNTIME_INFO,
 * which Java 4.9, 5.x and our broker all report). Before the load starts it waits until the slave is
 * registered and a probe send is answered SEND_OK with the slave level with the master; after the run
 * it checks that the slave holds every byte the master has, so a slave that lost data (or never got
 * any) cannot make SYNC_MASTER look fast.
 */
final class Replica {
    private final String masterAddr;
    private final String slaveAddr;
    private MQClientAPIImpl api;

    Replica(String masterAddr, String slaveAddr) {
        this.masterAddr = masterAddr;
        this.slaveAddr = slaveAddr;
    }

    void attach(DefaultMQProducer producer) {
        api = producer.getDefaultMQProducerImpl().getMqClientFactory().getMQClientAPIImpl();
    }

    /** commitLogMaxOffset of a broker, or -1 when it does not answer. */
    long maxOffset(String addr) {
        try {
            KVTable t = api.getBrokerRuntimeInfo(addr, 3000);
            String v = t.getTable().get("commitLogMaxOffset");
            return v == null ? -1 : Long.parseLong(v.trim());
        } catch (Exception e) {
            return -1;
        }
    }

    /**
     * {master, slave} commit-log max offsets. The slave is read first: while sends go on, master minus
     * slave is then an upper bound of how far the slave was behind (never below the true lag).
     */
    long[] offsets() {
        long slave = maxOffset(slaveAddr);
        return new long[] {maxOffset(masterAddr), slave};
    }

    /** The addresses the name server gives for the broker group of the topic (brokerId to address). */
    private Map<Long, String> registered(String topic) {
        try {
            TopicRouteData route = api.getTopicRouteInfoFromNameServer(topic, 3000);
            Map<Long, String> all = new TreeMap<>();
            for (BrokerData bd : route.getBrokerDatas()) {
                all.putAll(bd.getBrokerAddrs());
            }
            return all;
        } catch (Exception e) {
            return Map.of();
        }
    }

    Map<String, Object> awaitReady(DefaultMQProducer producer, String topic, byte[] body) throws InterruptedException {
        long start = System.nanoTime(), deadline = start + 90_000_000_000L;
        Map<String, Object> out = new LinkedHashMap<>();
        Map<String, Long> probeStatuses = new TreeMap<>();
        long probes = 0, stored = 0;
        boolean ready = false;
        Map<Long, String> addrs = Map.of();
        while (System.nanoTime() < deadline) {
            addrs = registered(topic);
            if (!addrs.containsKey(1L)) {
                Thread.sleep(200);
                continue;
            }
            probes++;
            String status;
            try {
                SendResult r = producer.send(new Message(topic, body));
                stored++;
                status = r.getSendStatus().name();
                if (r.getSendStatus() == SendStatus.SEND_OK) {
                    long[] o = offsets();
                    if (o[0] > 0 && o[0] == o[1]) {
                        ready = true;
                    }
                }
            } catch (Exception e) {
                status = e.getClass().getSimpleName();
            }
            probeStatuses.merge(status, 1L, Long::sum);
            if (ready) {
                break;
            }
            Thread.sleep(200);
        }
        double secs = (System.nanoTime() - start) / 1e9;
        out.put("ready", ready);
        out.put("ready_after_s", secs);
        out.put("registered_addrs", addrs.toString());
        out.put("slave_registered", addrs.containsKey(1L));
        out.put("probes", probes);
        out.put("probes_stored", stored);
        out.put("probe_statuses", new LinkedHashMap<>(probeStatuses));
        BrokerLoad.log("slave %s: %s after %.1f s (%d probe sends: %s; name server has %s)",
            slaveAddr, ready ? "in sync" : "NOT READY", secs, probes, probeStatuses, addrs);
        return out;
    }

    /** After the run: waits up to 30 s for the slave to reach the master's max offset, and says whether it did. */
    Map<String, Object> verify() throws InterruptedException {
        long start = System.nanoTime(), deadline = start + 30_000_000_000L;
        long[] o = offsets();
        while (!(o[0] > 0 && o[0] == o[1]) && System.nanoTime() < deadline) {
            Thread.sleep(200);
            o = offsets();
        }
        boolean holds = o[0] > 0 && o[0] == o[1];
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("master_commitlog_max_offset", o[0]);
        out.put("slave_commitlog_max_offset", o[1]);
        out.put("slave_holds_master_data", holds);
        out.put("verify_wait_s", (System.nanoTime() - start) / 1e9);
        BrokerLoad.log("after the run: master commit log at %d, slave at %d: %s", o[0], o[1],
            holds ? "the slave holds all of it" : "SLAVE DOES NOT HOLD THE MASTER'S DATA");
        return out;
    }
}
