package rocketmq.compat.harness;

import org.junit.jupiter.api.extension.ExtensionContext;
import org.junit.jupiter.api.extension.LifecycleMethodExecutionExceptionHandler;
import org.junit.jupiter.api.extension.TestWatcher;

/**
 * When a test or a class set-up fails, prints the output tails of every child process still running
 * (name servers, brokers), so a CI log shows what the servers said.
 */
public final class DumpLogsOnFailure implements TestWatcher, LifecycleMethodExecutionExceptionHandler {
    private static final int LINES = 60;

    @Override
    public void testFailed(ExtensionContext context, Throwable cause) {
        dump(context.getDisplayName());
    }

    @Override
    public void handleBeforeAllMethodExecutionException(ExtensionContext context, Throwable throwable)
        throws Throwable {
        dump("set-up of " + context.getDisplayName());
        throw throwable;
    }

    private static void dump(String what) {
        System.out.println("==== FAILED: " + what + " — running child processes ====\n"
            + ChildProcess.describeLive(LINES) + "\n==== end of child process logs ====");
    }
}
