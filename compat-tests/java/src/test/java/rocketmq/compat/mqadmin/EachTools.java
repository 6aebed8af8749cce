package rocketmq.compat.mqadmin;

import static org.junit.jupiter.api.Assertions.assertAll;

import java.util.List;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.stream.Stream;
import org.junit.jupiter.api.function.Executable;
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
            List<Future<?>> futures = tools.stream()
                .map(t -> pool.submit(() -> {
                    try {
                        scenario.accept(t);
                    } catch (Throwable e) {
                        throw new ScenarioFailed(e);
                    }
                    return null;
                }))
                .<Future<?>>map(f -> f)
                .toList();
            Stream<Executable> checks = futures.stream().map(f -> () -> {
                MqAdmin t = tools.get(futures.indexOf(f));
                try {
                    f.get();
                } catch (ExecutionException e) {
                    Throwable cause = e.getCause() instanceof ScenarioFailed ? e.getCause().getCause() : e.getCause();
                    throw labelled(t, cause);
                }
            });
            assertAll(what, checks);
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

    private static AssertionError labelled(MqAdmin t, Throwable e) {
        AssertionError error = new AssertionError("[mqadmin " + t.version() + "] " + e.getMessage(), e);
        error.setStackTrace(e.getStackTrace());
        return error;
    }

    /** Carries a scenario's throwable out of the pool. */
    private static final class ScenarioFailed extends RuntimeException {
        ScenarioFailed(Throwable cause) {
            super(cause);
        }
    }
}
