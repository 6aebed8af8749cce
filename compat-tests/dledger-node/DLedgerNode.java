// One Java DLedger 0.3.1.2 member, started the way Java DLedger's own `server` command starts it
// (a DLedgerConfig, then DLedgerServer.startup()), with the same options as our `dledger server`:
//   server -g GROUP -i ID -p PEERS -s STORE_BASE_DIR [--kebab-case-config-field VALUE]...
// Every DLedgerConfig field can be given by its kebab-case name (`--max-pending-requests-num 20000`),
// set through its Java setter. Prints "DLedger member [group, id] started" once serving, and
// shuts down (flush, checkpoint) on SIGTERM.
import io.openmessaging.storage.dledger.DLedgerConfig;
import io.openmessaging.storage.dledger.DLedgerServer;

import java.lang.reflect.Method;
import java.util.Locale;

public class DLedgerNode {
    private static String camel(String kebab) {
        StringBuilder out = new StringBuilder();
        boolean up = false;
        for (char c : kebab.toCharArray()) {
            if (c == '-') {
                up = true;
            } else {
                out.append(up ? Character.toUpperCase(c) : c);
                up = false;
            }
        }
        return out.toString();
    }

    private static void set(DLedgerConfig config, String field, String value) throws Exception {
        String setter = "set" + Character.toUpperCase(field.charAt(0)) + field.substring(1);
        for (Method m : DLedgerConfig.class.getMethods()) {
            if (!m.getName().equals(setter) || m.getParameterCount() != 1) {
                continue;
            }
            Class<?> t = m.getParameterTypes()[0];
            Object v;
            if (t == String.class) v = value;
            else if (t == int.class || t == Integer.class) v = Integer.parseInt(value);
            else if (t == long.class || t == Long.class) v = Long.parseLong(value);
            else if (t == boolean.class || t == Boolean.class) v = Boolean.parseBoolean(value);
            else if (t == float.class || t == Float.class) v = Float.parseFloat(value);
            else if (t == double.class || t == Double.class) v = Double.parseDouble(value);
            else continue;
            m.invoke(config, v);
            return;
        }
        throw new IllegalArgumentException("DLedgerConfig has no setter " + setter + " for --" + field);
    }

    public static void main(String[] args) throws Exception {
        if (args.length == 0 || !args[0].equals("server")) {
            System.err.println("usage: DLedgerNode server -g GROUP -i ID -p PEERS -s DIR [--config-field VALUE]...");
            System.exit(2);
        }
        DLedgerConfig config = new DLedgerConfig();
        for (int i = 1; i < args.length; i += 2) {
            if (i + 1 >= args.length) {
                throw new IllegalArgumentException("option " + args[i] + " has no value");
            }
            String key = args[i];
            String value = args[i + 1];
            switch (key) {
                case "-g": case "--group": config.setGroup(value); break;
                case "-i": case "--id": case "--self-id": config.setSelfId(value); break;
                case "-p": case "--peers": config.setPeers(value); break;
                case "-s": case "--store-base-dir": config.setStoreBaseDir(value); break;
                case "--peer-push-quotas": config.setPeerPushQuota(Integer.parseInt(value)); break;
                case "--preferred-leader-id": config.setPreferredLeaderIds(value); break;
                default:
                    if (!key.startsWith("--")) {
                        throw new IllegalArgumentException("unknown option " + key);
                    }
                    set(config, camel(key.substring(2).toLowerCase(Locale.ROOT)), value);
            }
        }
        DLedgerServer server = new DLedgerServer(config);
        server.startup();
        Runtime.getRuntime().addShutdownHook(new Thread(server::shutdown, "ShutdownHook"));
        System.out.println("DLedger member [" + config.getGroup() + ", " + config.getSelfId() + "] started");
        System.out.flush();
        Thread.currentThread().join();
    }
}
