package rocketmq.compat.driver;

import static rocketmq.compat.driver.Steps.check;

import java.nio.charset.StandardCharsets;
import java.util.Arrays;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.MessageSelector;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;

/**
 * Child-JVM driver for SQL92 property filters, compiled against the 4.9.7 client API and run with a 4.9.7 or
 * 5.x client classpath. Usage: {@code SqlFilterDriver <namesrvAddr> <step> [<step> ...]}:
 *
 * <ul>
 *   <li>{@code sqlFilter:TOPIC:GROUP} sends 20 messages with user properties {@code a} = 0..19 and
 *       {@code color} red (even) or blue (odd); a push consumer subscribed with
 *       {@code a >= 10 AND color = 'red'} must get exactly 10, 12, 14, 16 and 18.
 *   <li>{@code sqlRefused:TOPIC:GROUP} a push consumer whose expression does not parse fails to start: the
 *       broker answers CHECK_CLIENT_CONFIG with SUBSCRIPTION_PARSE_FAILED (23) and the parser's error.
 *   <li>{@code sqlUnsupported:TOPIC:GROUP} with {@code enablePropertyFilter=false} a bySql consumer fails to start:
 *       SYSTEM_ERROR (1), "The broker does not support consumer to filter message by SQL92".
 * </ul>
 */
public final class SqlFilterDriver {
    static final String EXPRESSION = "a >= 10 AND color = 'red'";
    static final Set<Integer> EXPECTED = Set.of(10, 12, 14, 16, 18);

    private final String namesrv;
    private final String runId = UUID.randomUUID().toString().substring(0, 8);

    private SqlFilterDriver(String namesrv) {
        this.namesrv = namesrv;
    }

    public static void main(String[] args) {
        if (args.length < 2) {
            System.err.println("usage: SqlFilterDriver <namesrvAddr> <step> [<step> ...]");
            System.exit(2);
        }
        SqlFilterDriver driver = new SqlFilterDriver(args[0]);
        Steps.printClient(driver.runId);
        boolean allOk = true;
        for (String step : Arrays.asList(args).subList(1, args.length)) {
            String[] s = step.split(":");
            allOk &= Steps.report(s[0], facts -> {
                switch (s[0]) {
                    case "sqlFilter" -> driver.sqlFilter(s[1], s[2], facts);
                    case "sqlRefused" -> driver.sqlRefused(s[1], s[2], facts);
                    case "sqlUnsupported" -> driver.sqlUnsupported(s[1], s[2], facts);
                    default -> throw new Steps.Failure("unknown step " + s[0]);
                }
            });
        }
        System.out.flush();
        System.exit(allOk ? 0 : 1);
    }

    private DefaultMQPushConsumer consumer(String group) {
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("sql-consumer-" + runId);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPollNameServerInterval(1000);
        consumer.setHeartbeatBrokerInterval(5000);
        return consumer;
    }

    private void sqlFilter(String topic, String group, Map<String, Object> facts) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer("sql_producer_" + runId);
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("sql-producer-" + runId);
        producer.setSendMsgTimeout(10_000);
        // The first route query also pays for the JVM opening its first connection, seconds on a loaded machine.
        producer.setMqClientApiTimeout(10_000);
        producer.start();
        try {
            for (int i = 0; i < 20; i++) {
                Message m = new Message(topic, "TagS", "sql-" + runId + "-" + i, Integer.toString(i).getBytes(StandardCharsets.UTF_8));
                m.putUserProperty("a", Integer.toString(i));
                m.putUserProperty("color", i % 2 == 0 ? "red" : "blue");
                check(producer.send(m).getSendStatus() == SendStatus.SEND_OK, "send " + i);
            }
        } finally {
            producer.shutdown();
        }
        Set<Integer> got = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer consumer = consumer(group);
        consumer.subscribe(topic, MessageSelector.bySql(EXPRESSION));
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            for (MessageExt msg : msgs) {
                got.add(Integer.parseInt(new String(msg.getBody(), StandardCharsets.UTF_8)));
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        try {
            long deadline = System.currentTimeMillis() + 60_000;
            while (!got.containsAll(EXPECTED) && System.currentTimeMillis() < deadline) {
                Thread.sleep(200);
            }
            // Anything that should have been filtered out would arrive with the rest.
            Thread.sleep(3000);
        } finally {
            consumer.shutdown();
        }
        facts.put("got", new TreeSet<>(got).toString().replace(" ", ""));
        check(got.equals(EXPECTED), "expected " + new TreeSet<>(EXPECTED) + ", got " + new TreeSet<>(got));
    }

    private void sqlRefused(String topic, String group, Map<String, Object> facts) throws Exception {
        DefaultMQPushConsumer consumer = consumer(group);
        consumer.subscribe(topic, MessageSelector.bySql("a >= AND"));
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
        try {
            consumer.start();
            throw new Steps.Failure("a consumer with a broken expression started");
        } catch (MQClientException e) {
            facts.put("code", e.getResponseCode());
            facts.put("remark", e.getErrorMessage());
            check(e.getResponseCode() == 23, "code " + e.getResponseCode() + ": " + e.getErrorMessage());
            // Java's remark is its parser's exception: the first line is the same; ours leaves out the list of
            // expected tokens that Java's goes on with.
            String remark = String.valueOf(e.getErrorMessage());
            check(remark.startsWith("org.apache.rocketmq.filter.parser.ParseException: Encountered \" \"AND\" \"AND \"\" at line 1, column 6."),
                "remark: " + remark);
        } finally {
            consumer.shutdown();
        }
    }

    private void sqlUnsupported(String topic, String group, Map<String, Object> facts) throws Exception {
        DefaultMQPushConsumer consumer = consumer(group);
        consumer.subscribe(topic, MessageSelector.bySql(EXPRESSION));
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
        try {
            consumer.start();
            throw new Steps.Failure("a SQL92 consumer started on a broker without enablePropertyFilter");
        } catch (MQClientException e) {
            facts.put("code", e.getResponseCode());
            facts.put("remark", e.getErrorMessage());
            check(e.getResponseCode() == 1 && "The broker does not support consumer to filter message by SQL92".equals(e.getErrorMessage()),
                "code " + e.getResponseCode() + ": " + e.getErrorMessage());
        } finally {
            consumer.shutdown();
        }
    }
}
