package rocketmq.compat.ha;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.Arrays;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;

/**
 * Reads a store's files the way a Java broker lays them out (commitlog/ and consumequeue/ segments named
 * by their 20-digit start offset) to compare a master's with its slave's, byte for byte. The files of a
 * broker that was killed can be read too: what it wrote to its mappings is in the page cache.
 */
public final class StoreFiles {
    public static final int MAGIC_V1 = 0xDAA320A7;
    public static final int MAGIC_V2 = 0xDAA320AB;
    public static final int BLANK_MAGIC = 0xCBD43194;
    public static final int CQ_UNIT = 20;

    private StoreFiles() {
    }

    /** The segments of a commit-log or consume-queue folder by start offset (numeric names only). */
    public static TreeMap<Long, Path> segments(Path dir) {
        TreeMap<Long, Path> files = new TreeMap<>();
        if (!Files.isDirectory(dir)) {
            return files;
        }
        try (Stream<Path> list = Files.list(dir)) {
            list.filter(p -> p.getFileName().toString().matches("\\d{20}")).forEach(p ->
                files.put(Long.parseLong(p.getFileName().toString()), p));
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
        return files;
    }

    public static Path commitLogDir(Path storeDir) {
        return storeDir.resolve("commitlog");
    }

    /** Bytes [from, to) of a segmented folder; fails if a segment holding part of the range is missing. */
    public static byte[] read(Path dir, long from, long to) {
        TreeMap<Long, Path> files = segments(dir);
        byte[] out = new byte[Math.toIntExact(to - from)];
        long at = from;
        while (at < to) {
            Map.Entry<Long, Path> seg = files.floorEntry(at);
            assertTrue(seg != null, "no segment in " + dir + " holds offset " + at + " (segments " + files.keySet() + ")");
            long size = size(seg.getValue());
            long inFile = at - seg.getKey();
            assertTrue(inFile < size, "no segment in " + dir + " holds offset " + at + " (segments " + files.keySet() + ")");
            int n = (int) Math.min(size - inFile, to - at);
            try (FileChannel ch = FileChannel.open(seg.getValue(), StandardOpenOption.READ)) {
                ByteBuffer buf = ByteBuffer.wrap(out, (int) (at - from), n);
                while (buf.hasRemaining()) {
                    if (ch.read(buf, inFile + (buf.position() - (at - from))) < 0) {
                        throw new IOException("short file " + seg.getValue());
                    }
                }
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            at += n;
        }
        return out;
    }

    private static long size(Path file) {
        try {
            return Files.size(file);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * Walks the commit log's records from its first segment (a blank marker moves to the next segment) and
     * returns where the last whole record ends: the data end, found from the bytes alone.
     */
    public static long dataEnd(Path commitLogDir) {
        TreeMap<Long, Path> files = segments(commitLogDir);
        if (files.isEmpty()) {
            return 0;
        }
        long end = files.firstKey();
        for (Map.Entry<Long, Path> seg : files.entrySet()) {
            if (seg.getKey() != end) {
                break;
            }
            long size = size(seg.getValue());
            ByteBuffer data;
            try (FileChannel ch = FileChannel.open(seg.getValue(), StandardOpenOption.READ)) {
                data = ch.map(FileChannel.MapMode.READ_ONLY, 0, size);
            } catch (IOException e) {
                throw new UncheckedIOException(e);
            }
            int pos = 0;
            while (pos + 8 <= size) {
                int total = data.getInt(pos);
                int magic = data.getInt(pos + 4);
                if (magic == BLANK_MAGIC) {
                    pos = (int) size;
                    break;
                }
                if ((magic != MAGIC_V1 && magic != MAGIC_V2) || total <= 0 || pos + (long) total > size) {
                    return seg.getKey() + pos;
                }
                pos += total;
            }
            end = seg.getKey() + size;
            if (pos < size) {
                return seg.getKey() + pos;
            }
        }
        return end;
    }

    /** The start offset of the first commit-log segment. */
    public static long firstSegment(Path commitLogDir) {
        TreeMap<Long, Path> files = segments(commitLogDir);
        assertTrue(!files.isEmpty(), "no commit-log segment in " + commitLogDir);
        return files.firstKey();
    }

    /** Fails at the first byte where the two folders differ in [from, to), naming the offset and both bytes. */
    public static void assertSameBytes(Path expectedDir, Path actualDir, long from, long to, String what) {
        byte[] expected = read(expectedDir, from, to);
        byte[] actual = read(actualDir, from, to);
        int at = Arrays.mismatch(expected, actual);
        assertEquals(-1, at, () -> what + ": first difference at offset " + (from + at) + " of [" + from + ", " + to
            + "): expected byte " + expected[at] + ", got " + actual[at]);
    }

    /**
     * Compares the consume queues of {@code topic} in two stores over their first {@code units} entries per
     * queue (queue id to unit count), byte for byte.
     */
    public static void assertSameConsumeQueues(Path expectedStore, Path actualStore, String topic, Map<Integer, Long> units,
                                        String what) {
        for (Map.Entry<Integer, Long> q : units.entrySet()) {
            Path e = expectedStore.resolve("consumequeue").resolve(topic).resolve(q.getKey().toString());
            Path a = actualStore.resolve("consumequeue").resolve(topic).resolve(q.getKey().toString());
            assertSameBytes(e, a, 0, q.getValue() * CQ_UNIT, what + ", consume queue " + topic + "/" + q.getKey());
        }
    }

    /** The queue ids that have a consume-queue folder for {@code topic}. */
    public static List<Integer> queueIds(Path storeDir, String topic) {
        Path dir = storeDir.resolve("consumequeue").resolve(topic);
        if (!Files.isDirectory(dir)) {
            return List.of();
        }
        try (Stream<Path> list = Files.list(dir)) {
            return list.map(p -> p.getFileName().toString()).filter(n -> n.matches("\\d+")).map(Integer::parseInt)
                .sorted().toList();
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /**
     * The queue id -> offset entries of {@code topic@group} in a broker's {@code config/consumerOffset.json}
     * (fastjson: {@code "offsetTable":{"T@g":{0:12,1:7}}}), empty if there are none.
     */
    public static Map<Integer, Long> persistedOffsets(Path storeDir, String topic, String group) throws IOException {
        Path file = storeDir.resolve("config").resolve("consumerOffset.json");
        Map<Integer, Long> offsets = new TreeMap<>();
        if (!Files.exists(file)) {
            return offsets;
        }
        String json = Files.readString(file);
        String name = "\"" + topic + "@" + group + "\"";
        int at = json.indexOf(name);
        if (at < 0) {
            return offsets;
        }
        int open = json.indexOf('{', at + name.length());
        int close = json.indexOf('}', open);
        assertTrue(open >= 0 && close >= 0, "unreadable entry " + name + " in " + file + ":\n" + json);
        Matcher m = Pattern.compile("\"?(\\d+)\"?\\s*:\\s*(-?\\d+)").matcher(json.substring(open + 1, close));
        while (m.find()) {
            offsets.put(Integer.parseInt(m.group(1)), Long.parseLong(m.group(2)));
        }
        return offsets;
    }
}
