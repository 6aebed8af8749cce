package rocketmq.compat.proxy;

import org.junit.jupiter.api.DisplayName;
import org.junit.jupiter.api.Test;

/**
 * The GrpcDriver scenarios ({@link ProxyGrpcTest#STEPS}) as tests, one per step, for each class that runs them through
 * a gRPC front of its own: Java's proxy (ProxyGrpcTest), ours in local mode (LocalProxyGrpcTest), our mqproxy
 * (ClusterProxyGrpcTest). A class says how a step's result is checked on each side it runs, and where the dlq step's
 * messages must be.
 */
abstract class GrpcScenarioTests {
    /** The step passed on every side the class runs. */
    abstract void assertStep(String step);

    /** Each side's broker holds the dlq step's messages in its groups' DLQ topics ({@link ProxyGrpcTest#assertInDlq}). */
    abstract void assertInDlq() throws Exception;

    @Test
    @DisplayName("normal sends, SimpleConsumer receive and ack: every message intact, once, none after the acks")
    void normal() {
        assertStep("normal");
    }

    @Test
    @DisplayName("SimpleConsumer: a message not acked comes back after its invisible time; changeInvisibleDuration")
    void invisible() {
        assertStep("invisible");
    }

    @Test
    @DisplayName("FIFO producer with message groups, PushConsumer of an orderly group: each group's order kept")
    void fifo() {
        assertStep("fifo");
    }

    @Test
    @DisplayName("delay messages (setDeliveryTimestamp) arrive not early, within 10 s")
    void delay() {
        assertStep("delay");
    }

    @Test
    @DisplayName("transactions: commit, rollback, and the checker's commit and rollback over Telemetry")
    void transaction() {
        assertStep("transaction");
    }

    @Test
    @DisplayName("PushConsumer: 200 messages, every one exactly once")
    void pushOnce() {
        assertStep("pushOnce");
    }

    @Test
    @DisplayName("recall: a delay message recalled with its send's handle never arrives; the other one does")
    void recall() {
        assertStep("recall");
    }

    @Test
    @DisplayName("after max attempts: a never-acked SimpleConsumer message and a failed PushConsumer one go to the DLQ")
    void dlq() throws Exception {
        assertStep("dlq");
        assertInDlq();
    }
}
