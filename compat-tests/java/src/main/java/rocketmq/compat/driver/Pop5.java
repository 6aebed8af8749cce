package rocketmq.compat.driver;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.lang.reflect.Modifier;
import java.lang.reflect.Proxy;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.TimeUnit;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.remoting.CommandCustomHeader;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * The 5.x pop calls of the official client, made reflectively ({@code PopDriver} is compiled against the 4.9.7 API,
 * which has none of them): {@code MQClientAPIImpl.popMessageAsync / ackMessageAsync / changeInvisibleTimeAsync} with
 * their request headers and callbacks, {@code ExtraInfoUtil}, and the same requests sent raw
 * ({@code RemotingClient.invokeSync}) where the exact response code and remark are what is compared.
 */
final class Pop5 {
    static final int POP_MESSAGE = 200050;
    static final int ACK_MESSAGE = 200051;
    static final int CHANGE_MESSAGE_INVISIBLETIME = 200053;
    static final String HEADERS = "org.apache.rocketmq.remoting.protocol.header.";
    static final long TIMEOUT_MS = 10_000;

    private Pop5() {
    }

    // ------------------------------------------------------------------------------------------------
    // reflection

    static Class<?> cls(String name) throws Steps.Failure {
        try {
            return Class.forName(name);
        } catch (ClassNotFoundException e) {
            throw new Steps.Failure(name + " is missing: the pop driver needs a 5.x client classpath");
        }
    }

    static Object newInstance(String name) throws Exception {
        return cls(name).getConstructor().newInstance();
    }

    private static boolean fits(Class<?> type, Object arg) {
        if (arg == null) {
            return !type.isPrimitive();
        }
        if (type.isPrimitive()) {
            return switch (type.getName()) {
                case "int" -> arg instanceof Integer;
                case "long" -> arg instanceof Long;
                case "boolean" -> arg instanceof Boolean;
                default -> false;
            };
        }
        if (type == Integer.class || type == Long.class || type == Boolean.class) {
            return type.isInstance(arg);
        }
        return type.isInstance(arg);
    }

    private static Object invoke(Class<?> type, Object target, String name, Object... args) throws Exception {
        for (Method m : type.getMethods()) {
            if (!m.getName().equals(name) || m.getParameterCount() != args.length
                || (target == null) != Modifier.isStatic(m.getModifiers())) {
                continue;
            }
            Class<?>[] p = m.getParameterTypes();
            boolean ok = true;
            for (int i = 0; i < p.length && ok; i++) {
                ok = fits(p[i], args[i]);
            }
            if (!ok) {
                continue;
            }
            try {
                return m.invoke(target, args);
            } catch (InvocationTargetException e) {
                if (e.getCause() instanceof Exception cause) {
                    throw cause;
                }
                throw e;
            }
        }
        throw new Steps.Failure(type.getSimpleName() + "." + name + "/" + args.length
            + " is missing: the pop driver needs a 5.x client classpath");
    }

    static Object call(Object target, String name, Object... args) throws Exception {
        return invoke(target.getClass(), target, name, args);
    }

    static Object callStatic(String className, String name, Object... args) throws Exception {
        return invoke(cls(className), null, name, args);
    }

    /** An instance of a pop callback interface completing {@code into}. */
    static Object callback(String iface, CompletableFuture<Object> into) throws Steps.Failure {
        Class<?> type = cls(iface);
        return Proxy.newProxyInstance(type.getClassLoader(), new Class<?>[] {type}, (proxy, method, a) -> {
            switch (method.getName()) {
                case "onSuccess" -> into.complete(a[0]);
                case "onException" -> into.completeExceptionally((Throwable) a[0]);
                case "toString" -> {
                    return iface + " proxy";
                }
                case "hashCode" -> {
                    return System.identityHashCode(proxy);
                }
                case "equals" -> {
                    return proxy == a[0];
                }
                default -> {
                }
            }
            return null;
        });
    }

    static Object await(CompletableFuture<Object> f) throws Exception {
        try {
            return f.get(TIMEOUT_MS + 15_000, TimeUnit.MILLISECONDS);
        } catch (ExecutionException e) {
            if (e.getCause() instanceof Exception cause) {
                throw cause;
            }
            throw e;
        }
    }

    // ------------------------------------------------------------------------------------------------
    // the calls

    /** What a PopResult said, and when the call was made. */
    record PopOut(String status, long popTime, long invisibleTime, long restNum, List<MessageExt> msgs, long startMs,
                  long endMs) {
    }

    static Object popHeader(String group, String topic, String brokerName, int queueId, int max, long invisibleMs,
                            long pollMs) throws Exception {
        Object h = newInstance(HEADERS + "PopMessageRequestHeader");
        call(h, "setConsumerGroup", group);
        call(h, "setTopic", topic);
        call(h, "setQueueId", Integer.valueOf(queueId));
        call(h, "setMaxMsgNums", max);
        call(h, "setInvisibleTime", invisibleMs);
        call(h, "setInitMode", 0); // ConsumeInitMode.MIN
        call(h, "setExpType", "TAG");
        call(h, "setExp", "*");
        call(h, "setOrder", Boolean.FALSE);
        call(h, "setBrokerName", brokerName);
        call(h, "setPollTime", pollMs);
        call(h, "setBornTime", System.currentTimeMillis());
        return h;
    }

    static PopOut pop(MQClientAPIImpl api, String brokerName, String addr, String group, String topic, int queueId,
                      int max, long invisibleMs, long pollMs) throws Exception {
        return pop(api, brokerName, addr, group, topic, queueId, max, invisibleMs, pollMs, false);
    }

    @SuppressWarnings("unchecked")
    static PopOut pop(MQClientAPIImpl api, String brokerName, String addr, String group, String topic, int queueId,
                      int max, long invisibleMs, long pollMs, boolean order) throws Exception {
        Object h = popHeader(group, topic, brokerName, queueId, max, invisibleMs, pollMs);
        call(h, "setOrder", Boolean.valueOf(order));
        CompletableFuture<Object> f = new CompletableFuture<>();
        long start = System.currentTimeMillis();
        call(api, "popMessageAsync", brokerName, addr, h, TIMEOUT_MS + pollMs,
            callback("org.apache.rocketmq.client.consumer.PopCallback", f));
        Object r = await(f);
        long end = System.currentTimeMillis();
        List<MessageExt> msgs = (List<MessageExt>) call(r, "getMsgFoundList");
        return new PopOut(String.valueOf(call(r, "getPopStatus")), (Long) call(r, "getPopTime"),
            (Long) call(r, "getInvisibleTime"), (Long) call(r, "getRestNum"), msgs == null ? List.of() : msgs, start,
            end);
    }

    /** An AckResult's status, popTime and extraInfo. */
    record AckOut(String status, long popTime, String extraInfo) {
    }

    static AckOut ackOut(Object r) throws Exception {
        return new AckOut(String.valueOf(call(r, "getStatus")), (Long) call(r, "getPopTime"),
            (String) call(r, "getExtraInfo"));
    }

    /** What the official consumer's ackAsync sends for a popped message (the real topic from its handle). */
    static Object ackHeader(MessageExt m, String group) throws Exception {
        String handle = handle(m);
        String[] f = split(handle);
        Object h = newInstance(HEADERS + "AckMessageRequestHeader");
        call(h, "setTopic", callStatic(HEADERS + "ExtraInfoUtil", "getRealTopic", f, m.getTopic(), group));
        call(h, "setQueueId", callStatic(HEADERS + "ExtraInfoUtil", "getQueueId", (Object) f));
        call(h, "setOffset", callStatic(HEADERS + "ExtraInfoUtil", "getQueueOffset", (Object) f));
        call(h, "setConsumerGroup", group);
        call(h, "setExtraInfo", handle);
        call(h, "setBrokerName", callStatic(HEADERS + "ExtraInfoUtil", "getBrokerName", (Object) f));
        return h;
    }

    static AckOut ack(MQClientAPIImpl api, String addr, MessageExt m, String group) throws Exception {
        CompletableFuture<Object> f = new CompletableFuture<>();
        call(api, "ackMessageAsync", addr, TIMEOUT_MS, callback("org.apache.rocketmq.client.consumer.AckCallback", f),
            ackHeader(m, group));
        return ackOut(await(f));
    }

    /** {@code batchAckMessageAsync(addr, timeout, callback, topic, group, handles)}: BATCH_ACK_MESSAGE. */
    static AckOut batchAck(MQClientAPIImpl api, String addr, String topic, String group, List<String> handles)
        throws Exception {
        CompletableFuture<Object> f = new CompletableFuture<>();
        call(api, "batchAckMessageAsync", addr, TIMEOUT_MS, callback("org.apache.rocketmq.client.consumer.AckCallback", f),
            topic, group, handles);
        return ackOut(await(f));
    }

    /** What the official consumer's changePopInvisibleTimeAsync sends. */
    static Object changeHeader(MessageExt m, String group, long invisibleMs) throws Exception {
        String handle = handle(m);
        String[] f = split(handle);
        Object h = newInstance(HEADERS + "ChangeInvisibleTimeRequestHeader");
        call(h, "setTopic", callStatic(HEADERS + "ExtraInfoUtil", "getRealTopic", f, m.getTopic(), group));
        call(h, "setQueueId", callStatic(HEADERS + "ExtraInfoUtil", "getQueueId", (Object) f));
        call(h, "setOffset", callStatic(HEADERS + "ExtraInfoUtil", "getQueueOffset", (Object) f));
        call(h, "setConsumerGroup", group);
        call(h, "setExtraInfo", handle);
        call(h, "setInvisibleTime", invisibleMs);
        call(h, "setBrokerName", callStatic(HEADERS + "ExtraInfoUtil", "getBrokerName", (Object) f));
        return h;
    }

    static AckOut change(MQClientAPIImpl api, String brokerName, String addr, MessageExt m, String group,
                         long invisibleMs) throws Exception {
        CompletableFuture<Object> f = new CompletableFuture<>();
        call(api, "changeInvisibleTimeAsync", brokerName, addr, changeHeader(m, group, invisibleMs), TIMEOUT_MS,
            callback("org.apache.rocketmq.client.consumer.AckCallback", f));
        return ackOut(await(f));
    }

    /** A request sent as is: the exact response (code, remark, header fields). */
    static RemotingCommand raw(MQClientAPIImpl api, String addr, int code, Object header) throws Exception {
        RemotingCommand request = RemotingCommand.createRequestCommand(code, (CommandCustomHeader) header);
        return api.getRemotingClient().invokeSync(addr, request, TIMEOUT_MS);
    }

    // ------------------------------------------------------------------------------------------------
    // receipt handles

    /** The receipt handle the client put in a popped message (POP_CK). */
    static String handle(MessageExt m) {
        return m.getProperty("POP_CK");
    }

    static String[] split(String handle) throws Exception {
        return (String[]) callStatic(HEADERS + "ExtraInfoUtil", "split", handle);
    }

    /** A receipt handle read with every ExtraInfoUtil getter. */
    record Handle(long ckQueueOffset, long popTime, long invisibleTime, int reviveQid, String retry, String brokerName,
                  int queueId, long queueOffset, int fields) {
    }

    static Handle parse(String handle) throws Exception {
        String[] f = split(handle);
        String u = HEADERS + "ExtraInfoUtil";
        return new Handle((Long) callStatic(u, "getCkQueueOffset", (Object) f), (Long) callStatic(u, "getPopTime", (Object) f),
            (Long) callStatic(u, "getInvisibleTime", (Object) f), (Integer) callStatic(u, "getReviveQid", (Object) f),
            (String) callStatic(u, "getRetry", (Object) f), (String) callStatic(u, "getBrokerName", (Object) f),
            (Integer) callStatic(u, "getQueueId", (Object) f), (Long) callStatic(u, "getQueueOffset", (Object) f),
            f.length);
    }
}
