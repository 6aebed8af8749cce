package rocketmq.bench;

import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.Message;

/**
 * Makes the benchmark topic exist before anything is measured: one sync send (the broker auto-creates
 * the topic from TBW102), retried while a freshly started broker has not yet registered, then wait
 * until the name server serves the topic's route, so a consumer started next finds its queues at once
 * (otherwise it would wait for its 30 s route poll).
 */
final class Prime {
    private Prime() {
    }

    static void topic(DefaultMQProducer producer, String topic) throws InterruptedException {
        long deadline = System.nanoTime() + 90_000_000_000L;
        Exception last = null;
        while (System.nanoTime() < deadline) {
            try {
                SendResult r = producer.send(new Message(topic, "prime".getBytes()));
                BrokerLoad.log("topic %s primed: %s", topic, r.getSendStatus());
                last = null;
                break;
            } catch (Exception e) {
                last = e;
                Thread.sleep(500);
            }
        }
        if (last != null) {
            throw new IllegalStateException("could not send the first message to " + topic, last);
        }
        while (System.nanoTime() < deadline) {
            try {
                if (!producer.fetchPublishMessageQueues(topic).isEmpty()) {
                    return;
                }
            } catch (Exception e) {
                last = e;
            }
            Thread.sleep(200);
        }
        throw new IllegalStateException("the name server never served the route of " + topic, last);
    }
}
