package rocketmq.bench;

import java.util.HashMap;
import java.util.Map;

/** {@code --key value} pairs; every option the harness passes has a default here or is required. */
final class Args {
    private final Map<String, String> values = new HashMap<>();

    Args(String[] argv, int from) {
        for (int i = from; i < argv.length; i += 2) {
            if (!argv[i].startsWith("--") || i + 1 >= argv.length) {
                throw new IllegalArgumentException("expected --key value, got " + argv[i]);
            }
            values.put(argv[i].substring(2), argv[i + 1]);
        }
    }

    String str(String key, String dflt) {
        String v = values.get(key);
        if (v == null && dflt == null) {
            throw new IllegalArgumentException("--" + key + " is required");
        }
        return v == null ? dflt : v;
    }

    String str(String key) {
        return str(key, null);
    }

    int integer(String key, int dflt) {
        return Integer.parseInt(str(key, Integer.toString(dflt)));
    }

    long lng(String key, long dflt) {
        return Long.parseLong(str(key, Long.toString(dflt)));
    }

    boolean bool(String key, boolean dflt) {
        return Boolean.parseBoolean(str(key, Boolean.toString(dflt)));
    }
}
