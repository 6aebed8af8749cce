package rocketmq.compat.harness;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.Socket;

/** Tells whether something accepts TCP connections on 127.0.0.1:port. */
public final class TcpProbe {
    private TcpProbe() {
    }

    public static boolean accepts(int port) {
        try (Socket socket = new Socket()) {
            socket.connect(new InetSocketAddress("127.0.0.1", port), 500);
            return true;
        } catch (IOException e) {
            return false;
        }
    }
}
