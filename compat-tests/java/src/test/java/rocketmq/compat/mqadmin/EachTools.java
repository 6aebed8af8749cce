package rocketmq.compat.mqadmin;

import static org.junit.jupiter.api.Assertions.assertAll;

import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.IntStream;
import org.junit.jupiter.api.function.ThrowingConsumer;

/**
 * Runs one scenario with every mqadmin version, and reports the failures of all versions together.
 * Scenarios that touch state shared by the versions run {@link #inTurn}; the others run
 * {@link #concurrently}, since an mqadmin run mostly waits (its client shutdown alone takes ~3 s).
 */
public final class EachTools {
    private final List<MqAdmin> tools;

    public EachTools(List<MqAdmin> tools) {
        this.tools = List.copyOf(tools);
    }

    public void concurrently(String what, ThrowingConsumer<MqAdmin> scenario) {
        ExecutorService pool = Executors.newFixedThreadPool(tools.size());
        try {
            List<Future<Throwable>> outcomes = tools.stream()
                .map(t -> pool.submit(() -> failureOf(scenario, t)))
                .toList();
            assertAll(what, IntStream.range(0, tools.size()).mapToObj(i -> () -> {
                Throwable failure = outcomes.get(i).get();
                if (failure != null) {
                    throw labelled(tools.get(i), failure);
                }
            }));
        } finally {
            pool.shutdownNow();
        }
    }

    public void inTurn(String what, ThrowingConsumer<MqAdmin> scenario) {
        assertAll(what, tools.stream().map(t -> () -> {
            try {
                scenario.accept(t);
            } catch (Throwable e) {
                throw labelled(t, e);
            }
        }));
    }

    private static Throwable failureOf(ThrowingConsumer<MqAdmin> scenario, MqAdmin t) {
        try {
            scenario.accept(t);
            return null;
        } catch (Throwable e) {
            return e;
        }
    }

    private static AssertionError labelled(MqAdmin t, Throwable e) {
        AssertionError error = new AssertionError("[mqadmin " + t.version() + "] " + e.getMessage(), e);
        error.setStackTrace(e.getStackTrace());
        return error;
    }
}
