package rocketmq.compat.runtime;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.HashMap;
import java.util.Map;

/** The Java RocketMQ versions under test, read from compat-tests/versions.env (the one place they are set). */
public final class Versions {
    /** The 4.9 line (4.9.7: Maven Central has no 4.9.8). */
    public static final String JAVA_49;
    /** The 5.x line. */
    public static final String JAVA_5;
    /** The RocketMQ 5 gRPC client, rocketmq-client-java (its own version line). */
    public static final String CLIENT_JAVA;

    static {
        Map<String, String> env = read(CompatDirs.compatDir().resolve("versions.env"));
        JAVA_49 = require(env, "RMQ_JAVA_49");
        JAVA_5 = require(env, "RMQ_JAVA_5");
        CLIENT_JAVA = require(env, "RMQ_CLIENT_JAVA");
    }

    private Versions() {
    }

    private static Map<String, String> read(Path file) {
        if (!Files.isRegularFile(file)) {
            throw new IllegalStateException("missing " + file + " (set -Drmq.compat.dir to the compat-tests folder)");
        }
        Map<String, String> values = new HashMap<>();
        try {
            for (String line : Files.readAllLines(file)) {
                line = line.strip();
                int eq = line.indexOf('=');
                if (!line.startsWith("#") && eq > 0) {
                    values.put(line.substring(0, eq).strip(), line.substring(eq + 1).strip().replace("\"", ""));
                }
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return values;
    }

    private static String require(Map<String, String> env, String key) {
        String value = env.get(key);
        if (value == null || value.isEmpty()) {
            throw new IllegalStateException("versions.env does not set " + key);
        }
        return value;
    }
}
