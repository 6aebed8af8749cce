package rocketmq.compat.harness;

import java.io.IOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;

/**
 * Finds TCP ports that are free on this machine right now. Ports handed out once are never handed out
 * again by this JVM, so two servers started by the same test run cannot be given the same port.
 * Ports come from 20000-32000, below Linux's ephemeral range, so outgoing connections do not take them.
 */
public final class FreePorts {
    private static final int LOW = 20_000;
    private static final int HIGH = 32_000;
    private static final Set<Integer> HANDED_OUT = ConcurrentHashMap.newKeySet();

    private FreePorts() {
    }

    /** One free port. */
    public static int one() {
        return block(1);
    }

    /** The first of {@code count} consecutive free ports. */
    public static synchronized int block(int count) {
        ThreadLocalRandom random = ThreadLocalRandom.current();
        for (int attempt = 0; attempt < 1000; attempt++) {
            int base = LOW + random.nextInt(HIGH - LOW - count);
            boolean allFree = true;
            for (int p = base; p < base + count && allFree; p++) {
                allFree = !HANDED_OUT.contains(p) && isFree(p);
            }
            if (allFree) {
                for (int p = base; p < base + count; p++) {
                    HANDED_OUT.add(p);
                }
                return base;
            }
        }
        throw new IllegalStateException("found no " + count + " consecutive free TCP ports in " + LOW + "-" + HIGH);
    }

    /** True if the port can be bound both on the wildcard address and on 127.0.0.1. */
    static boolean isFree(int port) {
        return canBind(new InetSocketAddress(port))
            && canBind(new InetSocketAddress(InetAddress.getLoopbackAddress(), port));
    }

    private static boolean canBind(InetSocketAddress address) {
        try (ServerSocket socket = new ServerSocket()) {
            socket.setReuseAddress(false);
            socket.bind(address);
            return true;
        } catch (IOException e) {
            return false;
        }
    }
}
