package rocketmq.compat.dledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.channels.FileChannel;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.common.message.MessageDecoder;
import org.apache.rocketmq.common.message.MessageExt;
import rocketmq.compat.ha.StoreFiles;

/**
 * Reads the files of a broker store in DLedger mode (the DLedger data segments of {@code dledger-<id>/data}, whose
 * entries each hold one commit-log record, and the old commit log of an upgraded store), and copies stores.
 * Works on the files of a stopped or killed broker (what a killed one wrote to its mappings is in the page cache).
 */
final class DlbStore {
    /** DLedger entry header: magic, size, index, term, pos, channel, chainCrc, bodyCrc, bodySize (6.2). */
    static final int ENTRY_HEADER = 48;
    static final int ENTRY_MAGIC = 1;
    static final int ENTRY_BLANK = -1;

    private DlbStore() {
    }

    /** One DLedger data entry and the commit-log record in its body. */
    record Entry(long index, long term, long pos, int size, MessageExt record) {
        /** The record's topic, queue and queue offset, and its key. */
        String describe() {
            return "entry " + index + " (term " + term + ", pos " + pos + ") " + record.getKeys() + "@" + record.getTopic() + "/"
                + record.getQueueId() + ":" + record.getQueueOffset();
        }
    }

    /** Copies a store folder (sparse: Java's index files are 400 MB mappings, nearly all holes). */
    static void copy(Path from, Path to) {
        try {
            Files.createDirectories(to.getParent());
            Process p = new ProcessBuilder("cp", "-a", "--sparse=always", from.toString(), to.toString())
                .redirectErrorStream(true).start();
            String out = new String(p.getInputStream().readAllBytes());
            if (!p.waitFor(120, TimeUnit.SECONDS) || p.exitValue() != 0) {
                throw new AssertionError("cp -a " + from + " " + to + " failed: " + out);
            }
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new AssertionError("interrupted copying " + from, e);
        }
    }

    /** The start offset of the first DLedger data segment (its file name), or -1 if there is none. */
    static long firstDataSegment(Path dataDir) {
        TreeMap<Long, Path> files = StoreFiles.segments(dataDir);
        return files.isEmpty() ? -1 : files.firstKey();
    }

    /** File names (start offsets) of a segmented folder. */
    static List<Long> segmentNames(Path dir) {
        return new ArrayList<>(StoreFiles.segments(dir).keySet());
    }

    /**
     * Walks the DLedger data segments from the first and returns every entry, failing on anything that is not an
     * entry laid out as 0.3.1.2 writes it: magic 1, pos = its own offset, contiguous indexes from {@code
     * firstIndex}, non-decreasing terms, size = 48 + body size, the record's PHYSICALOFFSET = pos + 48 and its
     * TOTALSIZE = the body size; a blank (-1, remaining) ends a segment, zeros end the data.
     */
    static List<Entry> entries(Path dataDir, int segmentSize) {
        TreeMap<Long, Path> files = StoreFiles.segments(dataDir);
        List<Entry> out = new ArrayList<>();
        long expectStart = files.isEmpty() ? 0 : files.firstKey();
        long lastTerm = -1;
        boolean ended = false;
        for (Map.Entry<Long, Path> seg : files.entrySet()) {
            long start = seg.getKey();
            assertEquals(expectStart, start, "DLedger data segments of " + dataDir + " are not adjacent: " + files.keySet());
            ByteBuffer data = map(seg.getValue());
            assertEquals(segmentSize, data.capacity(), "size of DLedger data segment " + seg.getValue());
            expectStart = start + segmentSize;
            int at = 0;
            if (ended) {
                // Past the end of the data only an empty (pre-created) segment may follow.
                assertTrue(data.getInt(0) == 0 && data.getInt(4) == 0, "DLedger data segment " + seg.getValue()
                    + " holds data after the data ended in the previous segment");
                continue;
            }
            while (at + 8 <= segmentSize) {
                int magic = data.getInt(at);
                int size = data.getInt(at + 4);
                if (magic == ENTRY_BLANK) {
                    assertEquals(segmentSize - at, size, "blank at " + (start + at) + " in " + seg.getValue());
                    break;
                }
                if (magic == 0 && size == 0) {
                    ended = true;
                    break;
                }
                long pos = start + at;
                assertEquals(ENTRY_MAGIC, magic, "magic of the DLedger entry at " + pos + " in " + seg.getValue());
                assertTrue(size > ENTRY_HEADER && at + size <= segmentSize, "size " + size + " of the DLedger entry at " + pos);
                long index = data.getLong(at + 8);
                long term = data.getLong(at + 16);
                assertEquals(pos, data.getLong(at + 24), "the pos field of the DLedger entry at " + pos);
                int bodySize = data.getInt(at + 44);
                assertEquals(size - ENTRY_HEADER, bodySize, "body size of the DLedger entry at " + pos);
                long expectIndex = out.isEmpty() ? index : out.get(out.size() - 1).index() + 1;
                assertEquals(expectIndex, index, "index of the DLedger entry at " + pos);
                assertTrue(term >= lastTerm, "term " + term + " of the DLedger entry at " + pos + " after term " + lastTerm);
                lastTerm = term;
                byte[] body = new byte[bodySize];
                data.get(at + ENTRY_HEADER, body);
                ByteBuffer record = ByteBuffer.wrap(body);
                assertEquals(bodySize, record.getInt(0), "TOTALSIZE of the record in the DLedger entry at " + pos);
                MessageExt m = MessageDecoder.decode(record, true, false);
                assertTrue(m != null, "the body of the DLedger entry at " + pos + " is not a commit-log record");
                assertEquals(pos + ENTRY_HEADER, m.getCommitLogOffset(),
                    "PHYSICALOFFSET of the record in the DLedger entry at " + pos + " (entry pos + 48)");
                out.add(new Entry(index, term, pos, size, m));
                at += size;
            }
        }
        return out;
    }

    /** The entries whose record belongs to one of {@code topics}, by commit-log offset (pos + 48). */
    static TreeMap<Long, Entry> byOffset(List<Entry> entries, List<String> topics) {
        TreeMap<Long, Entry> out = new TreeMap<>();
        for (Entry e : entries) {
            if (topics.contains(e.record().getTopic())) {
                out.put(e.pos() + ENTRY_HEADER, e);
            }
        }
        return out;
    }

    /**
     * The old commit log of an upgraded store against the plain store it was copied from: the same segments
     * below {@code divided} (the pre-allocated empty one at {@code divided} removed), each byte-identical, except
     * the 8 bytes at {@code dataEnd} in the last one, which hold the blank marker (remaining size, 0xCBD43194).
     */
    static void assertUpgradedOldLog(Path originalCommitLog, Path upgradedCommitLog, long dataEnd, long divided, int segmentSize,
                                     String what) {
        TreeMap<Long, Path> original = StoreFiles.segments(originalCommitLog);
        TreeMap<Long, Path> upgraded = StoreFiles.segments(upgradedCommitLog);
        assertEquals(new ArrayList<>(original.headMap(divided).keySet()), new ArrayList<>(upgraded.keySet()),
            what + ": the old commit-log segments (the plain store had " + original.keySet() + ")");
        for (Map.Entry<Long, Path> seg : upgraded.entrySet()) {
            long start = seg.getKey();
            byte[] before = read(original.get(start));
            byte[] after = read(seg.getValue());
            assertEquals(before.length, after.length, what + ": size of old segment " + seg.getValue());
            if (start <= dataEnd && dataEnd < start + segmentSize) {
                int at = (int) (dataEnd - start);
                ByteBuffer b = ByteBuffer.wrap(after);
                assertEquals(segmentSize - at, b.getInt(at), what + ": the blank marker's size at " + dataEnd + " in " + seg.getValue());
                assertEquals(StoreFiles.BLANK_MAGIC, b.getInt(at + 4), what + ": the blank marker's magic at " + (dataEnd + 4)
                    + " in " + seg.getValue());
                System.arraycopy(before, at, after, at, 8);
            }
            int diff = java.util.Arrays.mismatch(before, after);
            assertEquals(-1, diff, () -> what + ": old segment " + seg.getValue() + " changed at offset " + (start + diff)
                + " (besides the blank marker at " + dataEnd + ")");
        }
    }

    static byte[] read(Path file) {
        try {
            return Files.readAllBytes(file);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    private static ByteBuffer map(Path file) {
        try (FileChannel ch = FileChannel.open(file, StandardOpenOption.READ)) {
            return ch.map(FileChannel.MapMode.READ_ONLY, 0, ch.size());
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }
}
