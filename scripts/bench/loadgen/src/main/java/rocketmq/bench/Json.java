package rocketmq.bench;

import java.util.LinkedHashMap;
import java.util.Map;
import org.HdrHistogram.Histogram;

/** Just enough JSON writing for the result objects: nested maps and lists of numbers, strings and booleans. */
final class Json {
    private Json() {
    }

    static String write(Object v) {
        StringBuilder sb = new StringBuilder();
        append(sb, v);
        return sb.toString();
    }

    private static void append(StringBuilder sb, Object v) {
        if (v == null) {
            sb.append("null");
        } else if (v instanceof Map<?, ?> m) {
            sb.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> e : m.entrySet()) {
                if (!first) {
                    sb.append(", ");
                }
                first = false;
                append(sb, e.getKey().toString());
                sb.append(": ");
                append(sb, e.getValue());
            }
            sb.append('}');
        } else if (v instanceof Iterable<?> list) {
            sb.append('[');
            boolean first = true;
            for (Object e : list) {
                if (!first) {
                    sb.append(", ");
                }
                first = false;
                append(sb, e);
            }
            sb.append(']');
        } else if (v instanceof Double d) {
            sb.append(d.isNaN() || d.isInfinite() ? "null" : String.format("%.4f", d));
        } else if (v instanceof Number || v instanceof Boolean) {
            sb.append(v);
        } else {
            sb.append('"');
            for (char c : v.toString().toCharArray()) {
                if (c == '"' || c == '\\') {
                    sb.append('\\').append(c);
                } else if (c < 0x20) {
                    sb.append(String.format("\\u%04x", (int) c));
                } else {
                    sb.append(c);
                }
            }
            sb.append('"');
        }
    }

    /** Percentiles of a histogram recorded in microseconds, written in milliseconds. */
    static Map<String, Object> percentilesMs(Histogram h, double unitsPerMs) {
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("count", h.getTotalCount());
        if (h.getTotalCount() == 0) {
            return m;
        }
        m.put("p50", h.getValueAtPercentile(50) / unitsPerMs);
        m.put("p99", h.getValueAtPercentile(99) / unitsPerMs);
        m.put("p999", h.getValueAtPercentile(99.9) / unitsPerMs);
        m.put("max", h.getMaxValue() / unitsPerMs);
        m.put("mean", h.getMean() / unitsPerMs);
        return m;
    }
}
