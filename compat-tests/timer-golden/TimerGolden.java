import java.nio.charset.StandardCharsets;
import java.util.HexFormat;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.netty.NettyClientConfig;
import org.apache.rocketmq.remoting.netty.NettyRemotingClient;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * The client side of generate.sh, run with the rocketmq-client 5.3.3 classpath against a live Java 5.3.3 broker:
 * {@code java -cp <client cp> TimerGolden.java send <namesrv> <brokerName> <topic>} sends the golden timer messages
 * (see README.md) and prints one {@code SENT} line each plus {@code RECALLED}; {@code ... admin <brokerAddr>} prints
 * what GET_TIMER_CHECK_POINT (60), GET_TIMER_METRICS (61) and GET_BROKER_RUNTIME_INFO (28) answer.
 */
public final class TimerGolden {
    private TimerGolden() {
    }

    public static void main(String[] args) throws Exception {
        switch (args[0]) {
            case "send" -> send(args[1], args[2], args[3]);
            case "admin" -> admin(args[1]);
            default -> throw new IllegalArgumentException("send or admin, not " + args[0]);
        }
    }

    private record Spec(String key, int queue, String mode, long value) {
    }

    private static void send(String namesrv, String brokerName, String topic) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("timer_golden_producer");
        producer.setNamesrvAddr(namesrv);
        producer.setSendMsgTimeout(10_000);
        producer.setRetryTimesWhenSendFailed(0);
        producer.start();
        try {
            // a whole second a little ahead, so the absolute times below are known multiples of the precision
            long base = (System.currentTimeMillis() / 1000 + 2) * 1000;
            long hour = 3_600_000L;
            List<Spec> specs = List.of(
                new Spec("g-0", 0, "deliverMs", base + hour + 250),           // slot base+1h (rounded down)
                new Spec("g-1", 1, "deliverMs", base + hour),                 // a whole second: Java takes 1 s off
                new Spec("g-2", 2, "deliverMs", base + hour + 700),           // the same slot as g-0: prev pos chain
                new Spec("g-3", 3, "delaySec", 5400),                         // 1.5 h from the broker's now
                new Spec("g-4", 0, "delayMs", hour + 30_000),                 // 1 h 30 s from the broker's now
                new Spec("g-5", 1, "deliverMs", base + hour + 500),           // the slot of g-0, then recalled
                new Spec("g-roll", 2, "deliverMs", base + 60 * hour));        // 2.5 days: beyond the 2-day roll window
            String recallHandle = null;
            String recallId = null;
            for (Spec s : specs) {
                Message msg = new Message(topic, "TagGolden", s.key(), ("golden body " + s.key()).getBytes(StandardCharsets.UTF_8));
                msg.putUserProperty("golden", s.key());
                switch (s.mode()) {
                    case "deliverMs" -> msg.setDeliverTimeMs(s.value());
                    case "delaySec" -> msg.setDelayTimeSec(s.value());
                    case "delayMs" -> msg.setDelayTimeMs(s.value());
                    default -> throw new IllegalStateException(s.mode());
                }
                long start = System.currentTimeMillis();
                SendResult r = producer.send(msg, new MessageQueue(topic, brokerName, s.queue()));
                long end = System.currentTimeMillis();
                if (r.getSendStatus() != SendStatus.SEND_OK) {
                    throw new IllegalStateException(s.key() + ": " + r);
                }
                System.out.printf("SENT key=%s queue=%d mode=%s value=%d sendStartMs=%d sendEndMs=%d msgId=%s "
                        + "offsetMsgId=%s timerQueueOffset=%d recallHandle=%s%n", s.key(), s.queue(), s.mode(), s.value(),
                    start, end, r.getMsgId(), r.getOffsetMsgId(), r.getQueueOffset(), r.getRecallHandle());
                if (s.key().equals("g-5")) {
                    recallHandle = r.getRecallHandle();
                    recallId = r.getMsgId();
                }
            }
            String returned = producer.recallMessage(topic, recallHandle);
            System.out.printf("RECALLED key=g-5 msgId=%s returned=%s handle=%s%n", recallId, returned, recallHandle);
        } finally {
            producer.shutdown();
        }
    }

    private static void admin(String brokerAddr) throws Exception {
        NettyRemotingClient client = new NettyRemotingClient(new NettyClientConfig());
        client.start();
        try {
            for (int code : new int[] {60, 61, 28}) {
                RemotingCommand response = client.invokeSync(brokerAddr, RemotingCommand.createRequestCommand(code, null), 5000);
                byte[] body = response.getBody();
                String shown;
                if (body == null) {
                    shown = "null";
                } else if (code == 60) {
                    shown = body.length + " bytes " + HexFormat.of().formatHex(body);
                } else {
                    shown = new String(body, StandardCharsets.UTF_8);
                }
                Map<String, String> ext = response.getExtFields() == null ? null : new TreeMap<>(response.getExtFields());
                System.out.printf("RESPONSE request=%d code=%d remark=%s extFields=%s flag=%d language=%s version=%d%nBODY %s%n",
                    code, response.getCode(), response.getRemark(), ext, response.getFlag(), response.getLanguage(),
                    response.getVersion(), shown);
            }
        } finally {
            client.shutdown();
        }
    }
}
