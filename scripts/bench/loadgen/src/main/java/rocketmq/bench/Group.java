package rocketmq.bench;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.remoting.protocol.body.ClusterInfo;
import org.apache.rocketmq.remoting.protocol.body.KVTable;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;

/**
 * The brokers of one DLedger group (enableDLegerCommitLog=true: one brokerName, the DLedger leader the
 * master brokerId 0, the others slaves), seen from the client. Before the load it waits until the name
 * server lists every member of the group with one of them as brokerId 0 and a probe send is answered
 * SEND_OK; after the run it checks that every slave reaches the master's commit-log max offset
 * (GET_BROKER_RUNTIME_INFO {@code commitLogMaxOffset}). The members' CPU time and memory are measured
 * like a lone broker's: the group's cost is their sum.
 */
final class Group {
    /** listen address ("127.0.0.1:port") to the member's process, in the order the harness named them */
    private final Map<String, Proc> members = new LinkedHashMap<>();
    private final Map<String, Long> pids = new LinkedHashMap<>();
    private MQClientAPIImpl api;
    private String brokerName;
    private String masterAtStart;
    private Map<Long, String> idsAtStart = Map.of();

    /** {@code addr=pid,addr=pid,...} */
    Group(String spec, long clkTck) {
        for (String part : spec.split(",")) {
            int eq = part.lastIndexOf('=');
            if (eq < 0) {
                throw new IllegalArgumentException("--members wants addr=pid,addr=pid,..., got " + part);
            }
            long pid = Long.parseLong(part.substring(eq + 1));
            pids.put(part.substring(0, eq), pid);
            members.put(part.substring(0, eq), new Proc(pid, clkTck));
        }
    }

    void startSamplers() {
        members.values().forEach(Proc::startSampler);
    }

    void sample() {
        members.values().forEach(Proc::sample);
    }

    void attach(DefaultMQProducer producer) {
        api = producer.getDefaultMQProducerImpl().getMqClientFactory().getMQClientAPIImpl();
    }

    /** The broker group holding our members, as the name server has it: brokerId to address (empty if none yet). */
    private Map<Long, String> registered() {
        try {
            ClusterInfo ci = api.getBrokerClusterInfo(3000);
            for (BrokerData bd : ci.getBrokerAddrTable().values()) {
                if (bd.getBrokerAddrs().values().stream().anyMatch(members::containsKey)) {
                    brokerName = bd.getBrokerName();
                    return new TreeMap<>(bd.getBrokerAddrs());
                }
            }
        } catch (Exception e) {
            // not yet
        }
        return Map.of();
    }

    private boolean complete(Map<Long, String> ids) {
        return ids.containsKey(0L) && ids.size() == members.size() && members.keySet().containsAll(ids.values());
    }

    /**
     * Waits (up to 90 s) until the name server lists all members of the group, one of them the master,
     * and a probe send is answered SEND_OK.
     */
    Map<String, Object> awaitReady(DefaultMQProducer producer, String topic, byte[] body) throws InterruptedException {
        long start = System.nanoTime(), deadline = start + 90_000_000_000L;
        Map<String, Long> probeStatuses = new TreeMap<>();
        long probes = 0, stored = 0;
        boolean ready = false;
        Map<Long, String> ids = Map.of();
        while (System.nanoTime() < deadline) {
            ids = registered();
            if (!complete(ids)) {
                Thread.sleep(200);
                continue;
            }
            probes++;
            String status;
            try {
                SendResult r = producer.send(new Message(topic, body));
                stored++;
                status = r.getSendStatus().name();
                ready = r.getSendStatus() == SendStatus.SEND_OK;
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
        idsAtStart = ids;
        masterAtStart = ids.get(0L);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("ready", ready);
        out.put("ready_after_s", secs);
        // from the start of the load generator, i.e. from when every broker listened: the election, the
        // master's registration and the topic's creation included
        out.put("ready_since_start_s", (System.nanoTime() - BrokerLoad.STARTED) / 1e9);
        out.put("broker_name", brokerName);
        out.put("registered_at_start", ids.toString());
        out.put("master_at_start", masterAtStart);
        out.put("probes", probes);
        out.put("probes_stored", stored);
        out.put("probe_statuses", new LinkedHashMap<>(probeStatuses));
        BrokerLoad.log("DLedger group %s: %s after %.1f s, master %s (%d probe sends: %s; name server has %s)",
            brokerName, ready ? "ready" : "NOT READY", secs, masterAtStart, probes, probeStatuses, ids);
        return out;
    }

    /** The master's process, or null before {@link #awaitReady} found one. */
    Proc master() {
        return masterAtStart == null ? null : members.get(masterAtStart);
    }

    String masterAddr() {
        return masterAtStart;
    }

    /** Every member's CPU seconds so far, NaN for one that is gone (the result is then invalid, not lost). */
    Map<String, Double> cpuSeconds() {
        Map<String, Double> m = new LinkedHashMap<>();
        members.forEach((addr, p) -> {
            double v;
            try {
                v = p.cpuSeconds();
            } catch (IllegalStateException gone) {
                v = Double.NaN;
            }
            m.put(addr, v);
        });
        return m;
    }

    /** commitLogMaxOffset of a broker, or -1 when it does not answer. */
    private long maxOffset(String addr) {
        try {
            KVTable t = api.getBrokerRuntimeInfo(addr, 3000);
            String v = t.getTable().get("commitLogMaxOffset");
            return v == null ? -1 : Long.parseLong(v.trim());
        } catch (Exception e) {
            return -1;
        }
    }

    private Map<String, Long> offsets() {
        Map<String, Long> m = new LinkedHashMap<>();
        for (String addr : members.keySet()) {
            m.put(addr, maxOffset(addr));
        }
        return m;
    }

    private boolean level(Map<String, Long> o, String master) {
        Long mo = master == null ? null : o.get(master);
        return mo != null && mo > 0 && o.values().stream().allMatch(mo::equals);
    }

    /**
     * After the run: the master the name server names now (a change means the group re-elected during
     * the run), and up to 30 s for every slave to reach the master's commit-log max offset. Then the
     * per-member figures of the window ({@code cpu0}/{@code cpu1} at its start and end, {@code msgs}
     * messages stored in it).
     */
    Map<String, Object> verify(Map<String, Double> cpu0, Map<String, Double> cpu1, double secs, long msgs,
                               List<String> problems) throws InterruptedException {
        Map<Long, String> ids = registered();
        String masterAtEnd = ids.get(0L);
        long start = System.nanoTime(), deadline = start + 30_000_000_000L;
        Map<String, Long> o = offsets();
        while (!level(o, masterAtStart) && System.nanoTime() < deadline) {
            Thread.sleep(200);
            o = offsets();
        }
        boolean holds = level(o, masterAtStart);
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("registered_at_end", ids.toString());
        out.put("master_at_end", masterAtEnd);
        out.put("commitlog_max_offsets", new LinkedHashMap<>(o));
        out.put("slaves_hold_master_data", holds);
        out.put("verify_wait_s", (System.nanoTime() - start) / 1e9);
        BrokerLoad.log("after the run: master %s (at the start %s), commit log max offsets %s: %s", masterAtEnd,
            masterAtStart, o, holds ? "every slave holds the master's data" : "A SLAVE DOES NOT HOLD THE MASTER'S DATA");

        Map<String, Object> per = new LinkedHashMap<>();
        double sum = 0;
        for (Map.Entry<String, Proc> e : members.entrySet()) {
            String addr = e.getKey();
            Proc p = e.getValue();
            double cpu = cpu1.get(addr) - cpu0.get(addr);
            sum += cpu;
            Map<String, Object> m = new LinkedHashMap<>();
            m.put("pid", pids.get(addr));
            m.put("master", addr.equals(masterAtStart));
            m.put("broker_id_at_start", idOf(idsAtStart, addr));
            m.put("broker_id_at_end", idOf(ids, addr));
            m.put("cpu_s", cpu);
            m.put("cpu_util", cpu / secs);
            m.put("cpu_s_per_million", msgs > 0 ? cpu / msgs * 1e6 : Double.NaN);
            m.put("vmhwm_kb", p.statusKb("VmHWM"));
            m.put("peak_rss_sampled_kb", p.peakRssKb());
            m.put("peak_anon_kb", p.peakAnonKb());
            m.put("commitlog_max_offset", o.get(addr));
            per.put(addr, m);
            if (!p.alive()) {
                problems.add("the member " + addr + " (pid " + pids.get(addr) + ") ended during the run");
            }
        }
        out.put("members", per);
        out.put("group_cpu_s", sum);
        out.put("group_cpu_util", sum / secs);
        out.put("group_cpu_s_per_million", msgs > 0 ? sum / msgs * 1e6 : Double.NaN);
        if (masterAtEnd == null || !masterAtEnd.equals(masterAtStart)) {
            problems.add("the master changed during the run: " + masterAtStart + " at the start, " + masterAtEnd
                + " at the end (name server: " + ids + ")");
        }
        if (!holds) {
            problems.add("the slaves' commit-log max offsets " + o + " do not reach the master's (" + masterAtStart + ")");
        }
        return out;
    }

    private static Long idOf(Map<Long, String> ids, String addr) {
        List<Long> found = new ArrayList<>();
        ids.forEach((id, a) -> {
            if (a.equals(addr)) {
                found.add(id);
            }
        });
        return found.isEmpty() ? null : found.get(0);
    }
}
