package rocketmq.compat.harness;

import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;

/**
 * The command line of a child JVM: the running JDK's java, a small heap, serial GC, the module flags
 * Java RocketMQ needs on JDK 17, system properties, classpath, main class and arguments.
 */
public final class JavaCommand {
    private static final List<String> JDK17_FLAGS = List.of(
        "--add-opens", "java.base/jdk.internal.ref=ALL-UNNAMED",
        "--add-opens", "java.base/java.nio=ALL-UNNAMED",
        "--add-opens", "java.base/java.util=ALL-UNNAMED",
        "--add-opens", "java.base/java.lang=ALL-UNNAMED",
        "--add-exports", "java.base/sun.nio.ch=ALL-UNNAMED");

    private final String mainClass;
    private final String classpath;
    private final List<String> jvmFlags = new ArrayList<>();
    private final List<String> args = new ArrayList<>();
    private String heap = "-Xmx256m";
    private String minHeap = "-Xms64m";

    private JavaCommand(String mainClass, String classpath) {
        this.mainClass = mainClass;
        this.classpath = classpath;
    }

    public static JavaCommand main(String mainClass, String classpath) {
        return new JavaCommand(mainClass, classpath);
    }

    public JavaCommand heapMb(int min, int max) {
        this.minHeap = "-Xms" + min + "m";
        this.heap = "-Xmx" + max + "m";
        return this;
    }

    /** For short-lived tools: C1 only, which starts faster and burns less CPU on a small machine. */
    public JavaCommand shortLived() {
        jvmFlags.add("-XX:TieredStopAtLevel=1");
        return this;
    }

    public JavaCommand property(String key, String value) {
        jvmFlags.add("-D" + key + "=" + value);
        return this;
    }

    public JavaCommand args(String... more) {
        args.addAll(Arrays.asList(more));
        return this;
    }

    public List<String> toList() {
        List<String> cmd = new ArrayList<>();
        cmd.add(Path.of(System.getProperty("java.home"), "bin", "java").toString());
        cmd.add(minHeap);
        cmd.add(heap);
        cmd.add("-XX:+UseSerialGC");
        cmd.add("-Xshare:auto");
        cmd.add("-XX:-UsePerfData");
        cmd.addAll(JDK17_FLAGS);
        cmd.addAll(jvmFlags);
        cmd.add("-cp");
        cmd.add(classpath);
        cmd.add(mainClass);
        cmd.addAll(args);
        return cmd;
    }
}
