package rocketmq.compat.harness;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Map;

/**
 * Writes a Java properties file as plain {@code key=value} lines in the given order. Values that would
 * need escaping are refused, so the file means the same to Java's {@code Properties.load} and to a
 * simple line parser.
 */
public final class PropertiesFile {
    private PropertiesFile() {
    }

    public static Path write(Path file, Map<String, String> entries) {
        StringBuilder text = new StringBuilder();
        entries.forEach((key, value) -> {
            if (!value.matches("[A-Za-z0-9_./:;,+@ -]*") || !key.matches("[A-Za-z0-9_.]+")) {
                throw new IllegalArgumentException("needs escaping in a properties file: " + key + "=" + value);
            }
            text.append(key).append('=').append(value).append('\n');
        });
        try {
            Files.createDirectories(file.getParent());
            Files.writeString(file, text, StandardCharsets.UTF_8);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return file;
    }
}
