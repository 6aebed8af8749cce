package rocketmq.compat.runtime;

import java.nio.file.Files;
import java.nio.file.Path;

/**
 * Where things live, from system properties the pom sets (each overridable with -D):
 * {@code rmq.compat.dir} (compat-tests), {@code rmq.runtime.dir} (default compat-tests/.runtime),
 * {@code rmq.bin.dir} (our binaries), {@code rmq.driver.classes} (this project's compiled drivers).
 */
public final class CompatDirs {
    private CompatDirs() {
    }

    public static Path compatDir() {
        return Path.of(System.getProperty("rmq.compat.dir", "..")).toAbsolutePath().normalize();
    }

    public static Path runtimeDir() {
        String dir = System.getProperty("rmq.runtime.dir");
        return (dir == null ? compatDir().resolve(".runtime") : Path.of(dir)).toAbsolutePath().normalize();
    }

    public static Path binDir() {
        String dir = System.getProperty("rmq.bin.dir");
        return (dir == null ? compatDir().resolve("../target/debug") : Path.of(dir)).toAbsolutePath().normalize();
    }

    /** target/classes: the driver main classes run in child JVMs. */
    public static Path driverClasses() {
        Path dir = Path.of(System.getProperty("rmq.driver.classes", "target/classes")).toAbsolutePath().normalize();
        if (!Files.isDirectory(dir.resolve("rocketmq/compat/driver"))) {
            throw new IllegalStateException("driver classes not found in " + dir + " (run through mvn test)");
        }
        return dir;
    }
}
