package rocketmq.compat.harness;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.net.InetAddress;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.util.List;
import java.util.concurrent.CopyOnWriteArrayList;

/**
 * Accepts TCP connections on 127.0.0.1:{@code from} and pipes each, both ways, to 127.0.0.1:{@code to}, on
 * daemon threads, until closed.
 */
public final class TcpForwarder implements AutoCloseable {
    private final ServerSocket server;
    private final int to;
    private final List<Socket> sockets = new CopyOnWriteArrayList<>();

    private TcpForwarder(ServerSocket server, int to) {
        this.server = server;
        this.to = to;
    }

    public static TcpForwarder start(int from, int to) {
        try {
            ServerSocket server = new ServerSocket();
            server.setReuseAddress(true);
            server.bind(new InetSocketAddress(InetAddress.getLoopbackAddress(), from));
            TcpForwarder f = new TcpForwarder(server, to);
            Thread accept = new Thread(f::acceptLoop, "forward-" + from + "-" + to);
            accept.setDaemon(true);
            accept.start();
            return f;
        } catch (IOException e) {
            throw new UncheckedIOException("cannot listen on 127.0.0.1:" + from, e);
        }
    }

    private void acceptLoop() {
        while (!server.isClosed()) {
            try {
                Socket in = server.accept();
                Socket out = new Socket(InetAddress.getLoopbackAddress(), to);
                in.setTcpNoDelay(true);
                out.setTcpNoDelay(true);
                sockets.add(in);
                sockets.add(out);
                pipe(in, out);
                pipe(out, in);
            } catch (IOException e) {
                // closed, or the target refused: the connection is dropped, as a dead port would do
            }
        }
    }

    private void pipe(Socket from, Socket to) {
        Thread t = new Thread(() -> {
            byte[] buf = new byte[64 * 1024];
            try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
                for (int n = in.read(buf); n >= 0; n = in.read(buf)) {
                    out.write(buf, 0, n);
                    out.flush();
                }
            } catch (IOException e) {
                // one side went away
            } finally {
                closeQuietly(from);
                closeQuietly(to);
            }
        }, "pipe");
        t.setDaemon(true);
        t.start();
    }

    private static void closeQuietly(Socket s) {
        try {
            s.close();
        } catch (IOException e) {
            // already closed
        }
    }

    @Override
    public void close() {
        try {
            server.close();
        } catch (IOException e) {
            // already closed
        }
        sockets.forEach(TcpForwarder::closeQuietly);
    }
}
