package rocketmq.compat.runtime;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import rocketmq.compat.harness.ChildProcess;
import rocketmq.compat.harness.JavaCommand;

/**
 * A temp folder that a RocketMQ process uses as HOME, user.home, ROCKETMQ_HOME and java.io.tmpdir
 * (logs, stores and config files stay inside it). It holds the conf/logback_*.xml files the 4.9 start classes insist on
 * loading from ROCKETMQ_HOME; they log warnings and errors to the process output. Plain logback (on
 * every classpath resolve-runtime.sh writes) is pointed at a quiet config too, or third-party libraries
 * of the 5.x line log at DEBUG.
 */
public final class RocketmqHome {
    private static final String LOGBACK = """
        <?xml version="1.0" encoding="UTF-8"?>
        <configuration>
          <appender name="OUT" class="ch.qos.logback.core.ConsoleAppender">
            <target>%s</target>
            <encoder><pattern>%%d{HH:mm:ss.SSS} %%-5level [%%thread] %%logger{24} - %%msg%%n</pattern></encoder>
          </appender>
          <root level="%s"><appender-ref ref="OUT"/></root>
        </configuration>
        """;

    private final Path dir;

    private RocketmqHome(Path dir) {
        this.dir = dir;
    }

    public static RocketmqHome create(Path dir) {
        try {
            Files.createDirectories(dir.resolve("conf"));
            Files.createDirectories(dir.resolve("tmp"));
            Files.writeString(dir.resolve("conf/logback_broker.xml"), LOGBACK.formatted("System.out", "WARN"));
            Files.writeString(dir.resolve("conf/logback_namesrv.xml"), LOGBACK.formatted("System.out", "WARN"));
            Files.writeString(dir.resolve("conf/logback_tools.xml"), LOGBACK.formatted("System.err", "ERROR"));
            Files.writeString(dir.resolve("conf/logback_default.xml"), LOGBACK.formatted("System.err", "WARN"));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return new RocketmqHome(dir);
    }

    public Path dir() {
        return dir;
    }

    public JavaCommand applyTo(JavaCommand command) {
        return command.property("user.home", dir.toString())
            .property("rocketmq.home.dir", dir.toString())
            .property("logback.configurationFile", dir.resolve("conf/logback_default.xml").toString())
            // Netty's self-signed TLS certificates and the like land here, not in the shared /tmp
            .property("java.io.tmpdir", dir.resolve("tmp").toString());
    }

    public ChildProcess.Builder applyTo(ChildProcess.Builder builder) {
        return builder.directory(dir).env("HOME", dir.toString()).env("ROCKETMQ_HOME", dir.toString());
    }
}
