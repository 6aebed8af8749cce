package rocketmq.compat.dledger;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.UncheckedIOException;
import java.nio.ByteBuffer;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.Properties;
import java.util.TreeMap;
import rocketmq.compat.ha.StoreFiles;

/**
 * The files of one DLedger 0.3.1.2 member, as Java's {@code DLedgerMmapFileStore} lays them out (and our
 * {@code dledger server} and a broker in DLedger mode, Java's or ours, write them): {@code <storeBaseDir>/dledger-<id>/}
 * with {@code checkpoint}, {@code currterm}, {@code data/} (entries: a 48-byte header, then the body) and
 * {@code index/} (32-byte units: magic, pos, size, index, term), segments named by their 20-digit start offset.
 */
final class DLedgerFiles {
    static final int INDEX_UNIT = 32;
    /** DLedgerEntry.BODY_OFFSET: the entry header before the body. */
    static final int ENTRY_HEADER = 48;

    private DLedgerFiles() {
    }

    /** {@code checkpoint}: committedIndex and endIndex, written at every checkpoint and at shutdown. */
    static Map<String, Long> checkpoint(Path nodeDir) {
        Path file = nodeDir.resolve("checkpoint");
        // DLedger 0.3.x writes it by deleting the file, then renaming a .tmp over it, from its flush thread and at
        // shutdown: when both run at once at a Java member's stop, the second rename finds no .tmp and only the
        // previous checkpoint, checkpoint.bak, is left (an older, smaller endIndex: the common end only shrinks).
        if (!Files.exists(file) && Files.exists(nodeDir.resolve("checkpoint.bak"))) {
            System.out.println("no " + file + " (a Java DLedger member's racing checkpoint writes): its checkpoint.bak is read");
            file = nodeDir.resolve("checkpoint.bak");
        }
        Properties p = load(file);
        Map<String, Long> out = new LinkedHashMap<>();
        out.put("committedIndex", Long.parseLong(p.getProperty("committedIndex", "-1").trim()));
        out.put("endIndex", Long.parseLong(p.getProperty("endIndex", "-1").trim()));
        return out;
    }

    /** {@code currterm}'s currTerm: the member's current term (persisted whenever it changes). */
    static long currentTerm(Path nodeDir) {
        return Long.parseLong(load(nodeDir.resolve("currterm")).getProperty("currTerm", "-1").trim());
    }

    private static Properties load(Path file) {
        Properties p = new Properties();
        try (var in = Files.newInputStream(file)) {
            p.load(in);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot read " + file, e);
        }
        return p;
    }

    static TreeMap<Long, Path> segments(Path dir) {
        assertTrue(Files.isDirectory(dir), "no folder " + dir);
        return StoreFiles.segments(dir);
    }

    static long size(Path p) {
        try {
            return Files.size(p);
        } catch (IOException e) {
            throw new UncheckedIOException(e);
        }
    }

    /** Bytes [from, to) of a segmented folder (big-endian, as both write them). */
    static byte[] read(Path dir, long from, long to) {
        return StoreFiles.read(dir, from, to);
    }

    /** The index unit of entry {@code index}: magic, pos, size, index, term. */
    static ByteBuffer indexUnit(Path nodeDir, long index) {
        return ByteBuffer.wrap(read(nodeDir.resolve("index"), index * INDEX_UNIT, (index + 1) * INDEX_UNIT));
    }

    /** Where entry {@code index} ends in the data files (its unit's pos + size); checks that the unit is that entry's. */
    static long dataEnd(Path nodeDir, long index) {
        ByteBuffer unit = indexUnit(nodeDir, index);
        assertEquals(index, unit.getLong(16), "index of the unit at " + index + " in " + nodeDir);
        return unit.getLong(4) + unit.getInt(12);
    }

    /**
     * The segments of {@code folder} ("data" or "index") below {@code end} are the same (names and sizes) in both
     * members, and their bytes over [0, end) are identical.
     */
    static void assertSameBytes(Path a, String aLabel, Path b, String bLabel, String folder, long end) {
        TreeMap<Long, Path> as = segments(a.resolve(folder));
        TreeMap<Long, Path> bs = segments(b.resolve(folder));
        assertEquals(as.headMap(end).keySet(), bs.headMap(end).keySet(),
            folder + " segments below " + end + ": " + aLabel + ", then " + bLabel);
        for (Map.Entry<Long, Path> seg : as.headMap(end).entrySet()) {
            long from = seg.getKey();
            long to = Math.min(end, from + size(seg.getValue()));
            assertEquals(size(seg.getValue()), size(bs.get(from)), "size of " + folder + "/" + seg.getValue().getFileName()
                + " of " + aLabel + " and " + bLabel);
            byte[] x = read(a.resolve(folder), from, to);
            byte[] y = read(b.resolve(folder), from, to);
            int diff = Arrays.mismatch(x, y);
            assertEquals(-1, diff, () -> folder + "/" + seg.getValue().getFileName() + " of " + aLabel + " and " + bLabel
                + " differ at offset " + (from + diff) + " (compared up to " + end + "): " + x[diff] + " and " + y[diff]);
        }
    }
}
