package rocketmq.compat.driver;

import static rocketmq.compat.driver.Steps.check;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayDeque;
import java.util.Arrays;
import java.util.Deque;
import java.util.Map;
import java.util.UUID;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.LocalTransactionState;
import org.apache.rocketmq.client.producer.RequestCallback;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.TransactionListener;
import org.apache.rocketmq.client.producer.TransactionMQProducer;
import org.apache.rocketmq.client.producer.TransactionSendResult;
import org.apache.rocketmq.client.utils.MessageUtil;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Child-JVM driver for a small workload whose broker metrics a test reads while the clients are still
 * connected. Compiled against the 4.9.7 client API, run with a 4.9.7 or 5.x client classpath. Usage:
 * {@code MetricsDriver <namesrvAddr> <step> [<step> ...]}; every client a step starts stays connected until
 * the {@code hold} step ends:
 *
 * <ul>
 *   <li>{@code produce:TOPIC:COUNT} COUNT sync sends of a 100-byte body, all SEND_OK.
 *   <li>{@code consume:TOPIC:GROUP:COUNT} a push consumer of GROUP (from the first offset) until it got COUNT
 *       distinct messages of this run.
 *   <li>{@code transactions:TOPIC} a TransactionMQProducer sends one half message it commits and one it rolls back.
 *   <li>{@code deadLetter:TOPIC:GROUP:COUNT} COUNT sends to TOPIC; a push consumer of GROUP answers each
 *       RECONSUME_LATER with delay level -1, so the broker moves it to %DLQ%GROUP at once; ends once every
 *       message was delivered.
 *   <li>{@code delayed:TOPIC:COUNT} COUNT sends with delay level 1 (1 s), which the broker delivers to TOPIC later.
 *   <li>{@code timer:TOPIC:COUNT} COUNT 5.x timer messages ({@code setDelayTimeMs(2000)}), which the broker's timer
 *       delivers to TOPIC two seconds later.
 *   <li>{@code reply:TOPIC:GROUP} one request-reply: a push consumer of GROUP answers each request it gets on TOPIC
 *       with a reply message (SEND_REPLY_MESSAGE, stored in the broker's {@code <cluster>_REPLY_TOPIC}); the
 *       producer's request waits for it.
 *   <li>{@code hold:STOP_FILE:SECONDS} prints {@code HOLDING} and keeps every client connected until STOP_FILE
 *       exists (or SECONDS passed), then shuts them down.
 * </ul>
 */
public final class MetricsDriver {
    static final long TIMEOUT_MS = 60_000;
    private static final int BODY_BYTES = 100;

    private final String namesrv;
    private final String runId = UUID.randomUUID().toString().substring(0, 8);
    private final AtomicInteger instances = new AtomicInteger();
    /** Started clients, shut down last first by {@code hold}. */
    private final Deque<Runnable> shutdowns = new ArrayDeque<>();
    private DefaultMQProducer producer;

    private MetricsDriver(String namesrv) {
        this.namesrv = namesrv;
    }

    public static void main(String[] args) throws Exception {
        if (args.length < 2) {
            System.err.println("usage: MetricsDriver <namesrvAddr> <step> [<step> ...]");
            System.exit(2);
        }
        MetricsDriver driver = new MetricsDriver(args[0]);
        Steps.printClient(driver.runId);
        boolean allOk = true;
        for (String step : Arrays.asList(args).subList(1, args.length)) {
            String[] s = step.split(":");
            allOk &= Steps.report(s[0], facts -> driver.run(s, facts));
        }
        driver.shutdownAll();
        System.out.flush();
        System.exit(allOk ? 0 : 1);
    }

    private void run(String[] s, Map<String, Object> facts) throws Exception {
        switch (s[0]) {
            case "produce" -> produce(s[1], Integer.parseInt(s[2]), facts);
            case "consume" -> consume(s[1], s[2], Integer.parseInt(s[3]), facts);
            case "transactions" -> transactions(s[1], facts);
            case "deadLetter" -> deadLetter(s[1], s[2], Integer.parseInt(s[3]), facts);
            case "delayed" -> delayed(s[1], Integer.parseInt(s[2]), facts);
            case "timer" -> timer(s[1], Integer.parseInt(s[2]), facts);
            case "reply" -> requestReply(s[1], s[2], facts);
            case "hold" -> hold(Path.of(s[1]), Integer.parseInt(s[2]), facts);
            default -> throw new Steps.Failure("unknown step " + s[0]);
        }
    }

    private String instance(String what) {
        return what + "-" + runId + "-" + instances.incrementAndGet();
    }

    private DefaultMQProducer producer() throws Exception {
        if (producer == null) {
            producer = FeatureDriver.newProducer(namesrv, "metrics_producer_" + runId, instance("producer"));
            producer.start();
            DefaultMQProducer started = producer;
            shutdowns.push(started::shutdown);
        }
        return producer;
    }

    private Message message(String topic, String key) {
        byte[] body = ("metrics " + key + " ").repeat(10).substring(0, BODY_BYTES).getBytes(StandardCharsets.US_ASCII);
        return new Message(topic, "TagMetrics", key, body);
    }

    private void sendAll(String topic, String kind, int count) throws Exception {
        for (int i = 0; i < count; i++) {
            SendResult r = producer().send(message(topic, runId + "-" + kind + "-" + i));
            check(r.getSendStatus() == SendStatus.SEND_OK, kind + " send " + i + ": " + r);
        }
    }

    private void produce(String topic, int count, Map<String, Object> facts) throws Exception {
        sendAll(topic, "plain", count);
        facts.put("sent", count);
    }

    private DefaultMQPushConsumer startConsumer(String group, String topic, FeatureDriver.Deliveries into,
                                                boolean toDeadLetters) throws Exception {
        DefaultMQPushConsumer consumer = FeatureDriver.newPushConsumer(namesrv, group, instance("consumer-" + group));
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            msgs.forEach(m -> into.add(group, m));
            if (toDeadLetters) {
                context.setDelayLevelWhenNextConsume(-1);
                return ConsumeConcurrentlyStatus.RECONSUME_LATER;
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        shutdowns.push(consumer::shutdown);
        return consumer;
    }

    private void consume(String topic, String group, int count, Map<String, Object> facts) throws Exception {
        FeatureDriver.Deliveries got = new FeatureDriver.Deliveries();
        startConsumer(group, topic, got, false);
        boolean complete = got.await(FeatureDriver.prefixed(runId + "-plain-"), count, TIMEOUT_MS, 0);
        facts.put("received", got.distinctKeys(FeatureDriver.prefixed(runId + "-plain-")).size());
        check(complete, "consumed fewer than " + count);
    }

    private void transactions(String topic, Map<String, Object> facts) throws Exception {
        TransactionMQProducer tx = new TransactionMQProducer("metrics_tx_producer_" + runId);
        tx.setNamesrvAddr(namesrv);
        tx.setInstanceName(instance("tx-producer"));
        tx.setSendMsgTimeout(10_000);
        tx.setMqClientApiTimeout(10_000);
        tx.setTransactionListener(new TransactionListener() {
            @Override
            public LocalTransactionState executeLocalTransaction(Message msg, Object arg) {
                return "commit".equals(arg) ? LocalTransactionState.COMMIT_MESSAGE : LocalTransactionState.ROLLBACK_MESSAGE;
            }

            @Override
            public LocalTransactionState checkLocalTransaction(MessageExt msg) {
                return LocalTransactionState.ROLLBACK_MESSAGE;
            }
        });
        tx.start();
        shutdowns.push(tx::shutdown);
        for (String kind : new String[] {"commit", "rollback"}) {
            TransactionSendResult r = tx.sendMessageInTransaction(message(topic, runId + "-" + kind), kind);
            check(r.getSendStatus() == SendStatus.SEND_OK, kind + " half message: " + r);
            facts.put(kind, r.getLocalTransactionState());
        }
    }

    private void deadLetter(String topic, String group, int count, Map<String, Object> facts) throws Exception {
        sendAll(topic, "dlq", count);
        FeatureDriver.Deliveries got = new FeatureDriver.Deliveries();
        startConsumer(group, topic, got, true);
        boolean complete = got.await(FeatureDriver.prefixed(runId + "-dlq-"), count, TIMEOUT_MS, 0);
        facts.put("delivered", got.distinctKeys(FeatureDriver.prefixed(runId + "-dlq-")).size());
        check(complete, "delivered fewer than " + count);
    }

    private void delayed(String topic, int count, Map<String, Object> facts) throws Exception {
        for (int i = 0; i < count; i++) {
            Message msg = message(topic, runId + "-delayed-" + i);
            msg.setDelayTimeLevel(1);
            SendResult r = producer().send(msg);
            check(r.getSendStatus() == SendStatus.SEND_OK, "delayed send " + i + ": " + r);
        }
        facts.put("sent", count);
    }

    private void timer(String topic, int count, Map<String, Object> facts) throws Exception {
        for (int i = 0; i < count; i++) {
            Message msg = message(topic, runId + "-timer-" + i);
            // A 5.x client call; this module compiles against 4.9.7's Message.
            Message.class.getMethod("setDelayTimeMs", long.class).invoke(msg, 2000L);
            SendResult r = producer().send(msg);
            check(r.getSendStatus() == SendStatus.SEND_OK, "timer send " + i + ": " + r);
        }
        facts.put("timers", count);
    }

    private void requestReply(String topic, String group, Map<String, Object> facts) throws Exception {
        DefaultMQProducer replier = producer();
        DefaultMQPushConsumer responder = FeatureDriver.newPushConsumer(namesrv, group, instance("responder-" + group));
        responder.subscribe(topic, "*");
        responder.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt request : msgs) {
                try {
                    Message reply = MessageUtil.createReplyMessage(request, ("reply to " + request.getKeys()).getBytes(StandardCharsets.US_ASCII));
                    replier.send(reply);
                } catch (Exception e) {
                    System.out.println("reply: " + e);
                    return ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        responder.start();
        shutdowns.push(responder::shutdown);
        // The callback form, skipping its first call: 5.3.3's client calls it with no message as soon as the
        // request is sent, then with the reply. (Its synchronous request() returns at the send, and so reports a
        // timeout before any reply could arrive.)
        CompletableFuture<Message> replied = new CompletableFuture<>();
        producer().request(message(topic, runId + "-request"), new RequestCallback() {
            @Override
            public void onSuccess(Message message) {
                if (message != null) {
                    replied.complete(message);
                }
            }

            @Override
            public void onException(Throwable e) {
                replied.completeExceptionally(e);
            }
        }, TIMEOUT_MS / 2);
        Message answer = replied.get(TIMEOUT_MS / 2 + 5_000, TimeUnit.MILLISECONDS);
        check(answer != null, "no reply to the request");
        facts.put("reply", new String(answer.getBody(), StandardCharsets.US_ASCII));
        facts.put("replyTopic", answer.getTopic());
    }

    private void hold(Path stopFile, int seconds, Map<String, Object> facts) throws Exception {
        System.out.println("HOLDING");
        System.out.flush();
        long deadline = System.currentTimeMillis() + seconds * 1000L;
        while (!Files.exists(stopFile) && System.currentTimeMillis() < deadline) {
            Thread.sleep(100);
        }
        facts.put("stopped", Files.exists(stopFile) ? "by the stop file" : "after " + seconds + " s");
    }

    private void shutdownAll() {
        while (!shutdowns.isEmpty()) {
            try {
                shutdowns.pop().run();
            } catch (RuntimeException e) {
                System.out.println("shutdown: " + e);
            }
        }
    }
}
