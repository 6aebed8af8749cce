package rocketmq.compat.driver;

import java.util.LinkedHashMap;
import java.util.Map;
import org.apache.rocketmq.common.MQVersion;

/**
 * The protocol every driver speaks with {@code DriverRun}: a {@code CLIENT ...} line naming the client,
 * then one {@code RESULT step=<name> status=OK|FAILED <key=value>... millis=<n> [reason=<text to end of line>]}
 * line per step.
 */
final class Steps {
    private Steps() {
    }

    /** A failed check: the step reports it and the driver goes on with the next step. */
    static final class Failure extends Exception {
        private static final long serialVersionUID = 1L;

        Failure(String message) {
            super(message);
        }
    }

    interface Body {
        void run(Map<String, Object> facts) throws Exception;
    }

    static void check(boolean condition, String message) throws Failure {
        if (!condition) {
            throw new Failure(message);
        }
    }

    static void printClient(String runId) {
        System.out.printf("CLIENT version=%s serializeType=%s run=%s%n",
            MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION),
            System.getProperty("rocketmq.serialize.type", "JSON(default)"), runId);
    }

    /** Runs one step and prints its RESULT line; true if it passed. */
    static boolean report(String name, Body body) {
        Map<String, Object> facts = new LinkedHashMap<>();
        long start = System.currentTimeMillis();
        String reason = null;
        try {
            body.run(facts);
        } catch (Failure f) {
            reason = f.getMessage();
        } catch (Throwable t) {
            reason = "unexpected " + t;
            t.printStackTrace(System.out);
        }
        StringBuilder line = new StringBuilder("RESULT step=").append(name).append(" status=")
            .append(reason == null ? "OK" : "FAILED");
        facts.forEach((k, v) -> line.append(' ').append(k).append('=').append(String.valueOf(v).replace(' ', '_')));
        line.append(" millis=").append(System.currentTimeMillis() - start);
        if (reason != null) {
            line.append(" reason=").append(reason.replace('\n', ' '));
        }
        System.out.println(line);
        System.out.flush();
        return reason == null;
    }
}
