package rocketmq.compat.harness;

import java.util.ArrayList;
import java.util.List;

/**
 * What a test class started (name servers, brokers, proxies, client drivers), closed last first when the class ends.
 * A close that fails is printed and the others still run. Classes start their sides on several threads, so owning is
 * synchronized.
 */
public final class Started implements AutoCloseable {
    private final List<AutoCloseable> started = new ArrayList<>();

    /** Takes {@code c} to close at the end, and returns it. */
    public synchronized <T extends AutoCloseable> T own(T c) {
        started.add(c);
        return c;
    }

    @Override
    public void close() {
        List<AutoCloseable> all;
        synchronized (this) {
            all = new ArrayList<>(started);
            started.clear();
        }
        for (int i = all.size() - 1; i >= 0; i--) {
            try {
                all.get(i).close();
            } catch (Exception e) {
                System.out.println("closing " + all.get(i) + ": " + e);
            }
        }
    }
}
