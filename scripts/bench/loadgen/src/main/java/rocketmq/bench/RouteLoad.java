package rocketmq.bench;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.LongAdder;
import org.HdrHistogram.Histogram;
import org.HdrHistogram.Recorder;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyRemotingClient;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;
import org.apache.rocketmq.remoting.protocol.RequestCode;
import org.apache.rocketmq.remoting.protocol.ResponseCode;
import org.apache.rocketmq.remoting.protocol.header.namesrv.GetRouteInfoRequestHeader;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;

/**
 * Name-server load: GET_ROUTEINFO_BY_TOPIC (105) for a topic that a broker registered, as the client
 * library sends it (its remoting client, its header, its version stamp), kept at a bounded number of
 * outstanding requests on one connection, which is how every client talks to a name server. The
 * response body is checked once (a real route with a broker) and afterwards only for presence: decoding
 * each route would spend the load generator's core rather than the name server's.
 */
final class RouteLoad {
    private RouteLoad() {
    }

    static void run(Args a) throws Exception {
        String namesrv = a.str("namesrv");
        String topic = a.str("topic", "BenchmarkRoute");
        int threads = a.integer("threads", 2);
        int inflight = a.integer("inflight", 128);
        int warmup = a.integer("warmup", 5);
        int duration = a.integer("duration", 20);
        long clk = a.lng("clk-tck", 100);
        Proc server = new Proc(a.lng("server-pid", -1), clk);
        Proc self = new Proc(Proc.self(), clk);
        server.startSampler();

        DefaultMQProducer producer = new DefaultMQProducer("benchmark_route_primer");
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("bench-" + Proc.self());
        producer.start();
        Prime.topic(producer, topic);
        producer.shutdown();

        // the version the client stamps on its requests (>= 4.9.4 asks for standard JSON routes)
        System.setProperty(RemotingCommand.REMOTING_VERSION_KEY, Integer.toString(MQVersion.CURRENT_VERSION));
        NettyRemotingClient client = new NettyRemotingClient(new NettyClientConfig());
        client.start();
        RemotingCommand first = client.invokeSync(namesrv, request(topic), 3000);
        if (first.getCode() != ResponseCode.SUCCESS || first.getBody() == null) {
            throw new IllegalStateException("route query failed: " + first);
        }
        TopicRouteData route = TopicRouteData.decode(first.getBody(), TopicRouteData.class);
        if (route.getBrokerDatas().isEmpty() || route.getQueueDatas().isEmpty()) {
            throw new IllegalStateException("route without brokers or queues: " + route);
        }
        BrokerLoad.log("route of %s: %d bytes, %s", topic, first.getBody().length, route.getBrokerDatas());
        String dump = a.str("dump-frame", "");
        if (!dump.isEmpty()) {
            // the exact request frame this client sends, for the lean replaying client (scripts/bench/routeload)
            java.nio.ByteBuffer frame = request(topic).encode();
            byte[] bytes = new byte[frame.remaining()];
            frame.get(bytes);
            Files.write(Path.of(dump), bytes);
        }

        LongAdder ok = new LongAdder();
        LongAdder failed = new LongAdder();
        Map<String, LongAdder> errors = new ConcurrentHashMap<>();
        Recorder latency = new Recorder(3);
        Semaphore window = new Semaphore(inflight);
        boolean[] running = {true};
        List<Thread> issuers = new ArrayList<>();
        for (int i = 0; i < threads; i++) {
            Thread t = new Thread(() -> {
                while (running[0]) {
                    try {
                        if (!window.tryAcquire(100, TimeUnit.MILLISECONDS)) {
                            continue;
                        }
                    } catch (InterruptedException e) {
                        return;
                    }
                    long start = System.nanoTime();
                    client.invoke(namesrv, request(topic), 3000).whenComplete((resp, ex) -> {
                        if (ex == null && resp.getCode() == ResponseCode.SUCCESS && resp.getBody() != null) {
                            latency.recordValue((System.nanoTime() - start) / 1000);
                            ok.increment();
                        } else {
                            failed.increment();
                            String key = (ex != null ? ex.getClass().getSimpleName() + ": " + ex.getMessage()
                                : "code " + resp.getCode() + ": " + resp.getRemark()).replaceAll("[0-9]+", "N");
                            errors.computeIfAbsent(key, k -> new LongAdder()).increment();
                        }
                        window.release();
                    });
                }
            }, "route-issuer-" + i);
            t.setDaemon(true);
            t.start();
            issuers.add(t);
        }
        BrokerLoad.log("warm-up %d s (%d issuers, %d outstanding)", warmup, threads, inflight);
        Thread.sleep(warmup * 1000L);
        latency.reset();
        long ok0 = ok.sum(), failed0 = failed.sum();
        double cpu0 = server.cpuSeconds(), scpu0 = self.cpuSeconds();
        int serverCpu = a.integer("server-cpu", 0), clientCpu = a.integer("client-cpu", 1);
        long[] sc0 = Proc.coreJiffies(serverCpu), cc0 = Proc.coreJiffies(clientCpu);
        long t0 = System.nanoTime();
        Thread.sleep(duration * 1000L);
        long ok1 = ok.sum(), failed1 = failed.sum();
        double cpu1 = server.cpuSeconds(), scpu1 = self.cpuSeconds();
        long[] sc1 = Proc.coreJiffies(serverCpu), cc1 = Proc.coreJiffies(clientCpu);
        double secs = (System.nanoTime() - t0) / 1e9;
        Histogram h = latency.getIntervalHistogram();
        running[0] = false;
        for (Thread t : issuers) {
            t.join(5000);
        }
        window.tryAcquire(inflight, 5, TimeUnit.SECONDS);
        server.sample();

        long n = ok1 - ok0;
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("threads", threads);
        out.put("inflight", inflight);
        out.put("route_bytes", first.getBody().length);
        out.put("window_s", secs);
        out.put("queries_ok", n);
        out.put("queries_failed", failed1 - failed0);
        out.put("qps", n / secs);
        out.put("latency_ms", Json.percentilesMs(h, 1000.0));
        out.put("server_cpu_s", cpu1 - cpu0);
        out.put("server_cpu_util", (cpu1 - cpu0) / secs);
        out.put("server_cpu_s_per_million", n > 0 ? (cpu1 - cpu0) / n * 1e6 : Double.NaN);
        out.put("loadgen_cpu_util", (scpu1 - scpu0) / secs);
        out.put("server_core_busy", Proc.busyFraction(sc0, sc1));
        out.put("client_core_busy", Proc.busyFraction(cc0, cc1));
        out.put("server_vmhwm_kb", server.statusKb("VmHWM"));
        out.put("server_peak_anon_kb", server.peakAnonKb());
        Map<String, Object> errs = new LinkedHashMap<>();
        errors.forEach((k, v) -> errs.put(k, v.sum()));
        out.put("errors", errs);
        Files.writeString(Path.of(a.str("out")), Json.write(out) + "\n", StandardCharsets.UTF_8);
        BrokerLoad.log("%.0f queries/s, p99 %.2f ms, name server %.2f core, loadgen %.2f core, %d failed",
            n / secs, h.getTotalCount() == 0 ? 0 : h.getValueAtPercentile(99) / 1000.0,
            (cpu1 - cpu0) / secs, (scpu1 - scpu0) / secs, failed1 - failed0);
        Main.shutdownQuietly(client::shutdown);
    }

    private static RemotingCommand request(String topic) {
        GetRouteInfoRequestHeader header = new GetRouteInfoRequestHeader();
        header.setTopic(topic);
        return RemotingCommand.createRequestCommand(RequestCode.GET_ROUTEINFO_BY_TOPIC, header);
    }
}
