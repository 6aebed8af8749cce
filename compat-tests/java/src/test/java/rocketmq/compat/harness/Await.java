package rocketmq.compat.harness;

import java.time.Duration;
import java.util.concurrent.Callable;
import java.util.function.Predicate;
import java.util.function.Supplier;

/** Polls a condition until it holds or a deadline passes; never a fixed sleep. */
public final class Await {
    private static final long POLL_MILLIS = 200;

    private Await() {
    }

    /** A check that may throw; a throw counts as "not yet" and is reported if the deadline passes. */
    @FunctionalInterface
    public interface Check {
        boolean holds() throws Exception;
    }

    /** Waits until {@code check} holds; fails with {@code what}, the last error and {@code diagnostics}. */
    public static void until(String what, Duration timeout, Check check, Supplier<String> diagnostics) {
        until(what, timeout, () -> check.holds() ? Boolean.TRUE : null, v -> v != null, diagnostics);
    }

    /**
     * Calls {@code probe} until its value passes {@code accept}, and returns that value.
     * A probe that throws or returns a rejected value is tried again after a short pause.
     */
    public static <T> T until(String what, Duration timeout, Callable<T> probe, Predicate<? super T> accept,
                              Supplier<String> diagnostics) {
        long deadline = System.nanoTime() + timeout.toNanos();
        Object last = null;
        while (true) {
            try {
                T value = probe.call();
                if (accept.test(value)) {
                    return value;
                }
                last = "last value: " + value;
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted while waiting for " + what, e);
            } catch (Exception e) {
                last = "last error: " + e;
            }
            if (System.nanoTime() - deadline > 0) {
                throw new AssertionError("timed out after " + timeout.toSeconds() + " s waiting for " + what
                    + "\n" + last + "\n" + diagnostics.get());
            }
            try {
                Thread.sleep(POLL_MILLIS);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new AssertionError("interrupted while waiting for " + what, e);
            }
        }
    }
}
