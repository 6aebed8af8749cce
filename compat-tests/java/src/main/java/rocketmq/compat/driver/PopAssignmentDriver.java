package rocketmq.compat.driver;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Map;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.common.message.MessageQueue;

/**
 * A 5.x push consumer with {@code clientRebalance=false}: it asks a broker for its queues (QUERY_ASSIGNMENT) instead of
 * computing them, and reads them in the mode the broker names. Prints {@code RESULT step=assignment} with the queues of
 * {@code topic} it holds for pop ({@code pop=[broker:queueId,...]}) and for pull ({@code pull=[...]}), once it holds
 * some (at most 30 s). Run with the 5.3.3 client (the 5.x calls are made reflectively).
 *
 * <p>Args: namesrvAddr topic group
 */
public final class PopAssignmentDriver {
    private PopAssignmentDriver() {
    }

    public static void main(String[] args) throws Exception {
        String namesrv = args[0];
        String topic = args[1];
        String group = args[2];
        Steps.printClient("pop-assignment");
        DefaultMQPushConsumer consumer = new DefaultMQPushConsumer(group);
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName("pop-assignment-" + System.nanoTime());
        consumer.subscribe(topic, "*");
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> ConsumeConcurrentlyStatus.CONSUME_SUCCESS);
        consumer.getClass().getMethod("setClientRebalance", boolean.class).invoke(consumer, false);
        consumer.start();
        try {
            Steps.report("assignment", facts -> {
                Object rebalance = consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl();
                long deadline = System.currentTimeMillis() + 30_000;
                List<String> pop = List.of();
                List<String> pull = List.of();
                while (System.currentTimeMillis() < deadline && pop.isEmpty() && pull.isEmpty()) {
                    Thread.sleep(200);
                    pop = queues(rebalance, "getPopProcessQueueTable", topic);
                    pull = queues(rebalance, "getProcessQueueTable", topic);
                }
                facts.put("pop", pop);
                facts.put("pull", pull);
                Steps.check(!pop.isEmpty() || !pull.isEmpty(), "no queue assigned within 30 s");
            });
        } finally {
            consumer.shutdown();
        }
        System.exit(0);
    }

    private static List<String> queues(Object rebalance, String table, String topic) throws Exception {
        Method getter = rebalance.getClass().getMethod(table);
        List<String> held = new ArrayList<>();
        for (Object key : ((Map<?, ?>) getter.invoke(rebalance)).keySet()) {
            MessageQueue mq = (MessageQueue) key;
            if (mq.getTopic().equals(topic)) {
                held.add(mq.getBrokerName() + ":" + mq.getQueueId());
            }
        }
        Collections.sort(held);
        return held;
    }
}
