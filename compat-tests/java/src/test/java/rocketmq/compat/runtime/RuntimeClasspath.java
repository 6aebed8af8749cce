package rocketmq.compat.runtime;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.file.Files;
import java.nio.file.Path;

/** The classpath of one Java RocketMQ artifact, as resolve-runtime.sh wrote it to .runtime/cp/. */
public final class RuntimeClasspath {
    private RuntimeClasspath() {
    }

    public static String of(String artifact, String version) {
        Path file = CompatDirs.runtimeDir().resolve("cp").resolve(artifact + "-" + version + ".cp");
        if (!Files.isRegularFile(file)) {
            throw new IllegalStateException("missing classpath file " + file
                + ": run compat-tests/resolve-runtime.sh first (or point -Drmq.runtime.dir at its .runtime folder)");
        }
        try {
            String cp = Files.readString(file).strip();
            if (cp.isEmpty()) {
                throw new IllegalStateException("empty classpath file " + file + ": rerun compat-tests/resolve-runtime.sh");
            }
            for (String entry : cp.split(":")) {
                if (!Files.exists(Path.of(entry))) {
                    throw new IllegalStateException("classpath file " + file + " names a missing jar " + entry
                        + ": rerun compat-tests/resolve-runtime.sh");
                }
            }
            return cp;
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
