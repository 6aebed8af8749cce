package rocketmq.compat.driver;

import apache.rocketmq.v2.AckMessageEntry;
import apache.rocketmq.v2.AckMessageRequest;
import apache.rocketmq.v2.Address;
import apache.rocketmq.v2.AddressScheme;
import apache.rocketmq.v2.Broker;
import apache.rocketmq.v2.ChangeInvisibleDurationRequest;
import apache.rocketmq.v2.ClientType;
import apache.rocketmq.v2.Endpoints;
import apache.rocketmq.v2.FilterExpression;
import apache.rocketmq.v2.FilterType;
import apache.rocketmq.v2.GetOffsetRequest;
import apache.rocketmq.v2.Language;
import apache.rocketmq.v2.Message;
import apache.rocketmq.v2.MessageQueue;
import apache.rocketmq.v2.MessageType;
import apache.rocketmq.v2.MessagingServiceGrpc;
import apache.rocketmq.v2.PullMessageRequest;
import apache.rocketmq.v2.QueryOffsetRequest;
import apache.rocketmq.v2.QueryRouteRequest;
import apache.rocketmq.v2.RecallMessageRequest;
import apache.rocketmq.v2.ReceiveMessageRequest;
import apache.rocketmq.v2.ReceiveMessageResponse;
import apache.rocketmq.v2.Resource;
import apache.rocketmq.v2.SendMessageRequest;
import apache.rocketmq.v2.Settings;
import apache.rocketmq.v2.Status;
import apache.rocketmq.v2.Subscription;
import apache.rocketmq.v2.SubscriptionEntry;
import apache.rocketmq.v2.SystemProperties;
import apache.rocketmq.v2.TelemetryCommand;
import apache.rocketmq.v2.UpdateOffsetRequest;
import apache.rocketmq.v2.UA;
import com.google.protobuf.ByteString;
import com.google.protobuf.util.Durations;
import com.google.protobuf.util.Timestamps;
import io.grpc.ManagedChannel;
import io.grpc.ManagedChannelBuilder;
import io.grpc.Metadata;
import io.grpc.StatusRuntimeException;
import io.grpc.stub.MetadataUtils;
import io.grpc.stub.StreamObserver;
import java.util.Iterator;
import java.util.UUID;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicReference;
import java.util.function.Supplier;

/**
 * Child-JVM driver that sends the same bad requests to a RocketMQ 5 gRPC proxy with the raw
 * {@code apache.rocketmq.v2} stubs (it runs on the rocketmq-proxy classpath, which holds them and grpc-java), and
 * prints one line per case: {@code CASE <name> grpc=<gRPC status> code=<Status.code> message=<Status.message>}
 * ({@code code=-} when the call itself failed). Usage:
 * {@code GrpcBadInputDriver <endpoint> <brokerName> <NORMAL topic> <FIFO topic> <consumer group> <DELAY topic>}.
 */
public final class GrpcBadInputDriver {
    private static final Metadata.Key<String> CLIENT_ID = Metadata.Key.of("x-mq-client-id", Metadata.ASCII_STRING_MARSHALLER);

    private final Endpoints endpoints;
    private final MessagingServiceGrpc.MessagingServiceBlockingStub anonymous;
    private final MessagingServiceGrpc.MessagingServiceBlockingStub client;
    private final MessagingServiceGrpc.MessagingServiceStub async;

    private GrpcBadInputDriver(ManagedChannel channel, String host, int port, String clientId) {
        this.endpoints = Endpoints.newBuilder().setScheme(AddressScheme.IPv4)
            .addAddresses(Address.newBuilder().setHost(host).setPort(port)).build();
        Metadata common = new Metadata();
        common.put(Metadata.Key.of("x-mq-language", Metadata.ASCII_STRING_MARSHALLER), "JAVA");
        common.put(Metadata.Key.of("x-mq-protocol", Metadata.ASCII_STRING_MARSHALLER), "v2");
        common.put(Metadata.Key.of("x-mq-client-version", Metadata.ASCII_STRING_MARSHALLER), "5.0.8");
        Metadata withId = new Metadata();
        withId.merge(common);
        withId.put(CLIENT_ID, clientId);
        this.anonymous = MessagingServiceGrpc.newBlockingStub(channel)
            .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(common));
        this.client = MessagingServiceGrpc.newBlockingStub(channel)
            .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(withId));
        this.async = MessagingServiceGrpc.newStub(channel)
            .withInterceptors(MetadataUtils.newAttachHeadersInterceptor(withId));
    }

    public static void main(String[] args) throws Exception {
        String endpoint = args[0];
        String broker = args[1];
        String normal = args[2];
        String fifo = args[3];
        String group = args[4];
        String delay = args[5];
        String host = endpoint.substring(0, endpoint.lastIndexOf(':'));
        int port = Integer.parseInt(endpoint.substring(endpoint.lastIndexOf(':') + 1));
        ManagedChannel channel = ManagedChannelBuilder.forAddress(host, port).usePlaintext()
            .maxInboundMessageSize(16 << 20).build();
        try {
            new GrpcBadInputDriver(channel, host, port, "bad-input-" + UUID.randomUUID()).run(broker, normal, fifo, group, delay);
        } finally {
            channel.shutdownNow().awaitTermination(5, TimeUnit.SECONDS);
        }
        System.out.println("DONE");
        System.exit(0);
    }

    private MessagingServiceGrpc.MessagingServiceBlockingStub c() {
        return client.withDeadlineAfter(10, TimeUnit.SECONDS);
    }

    private void run(String broker, String normal, String fifo, String group, String delay) throws Exception {
        // Unknown topic, invalid names, no client id.
        unary("queryRoute.unknownTopic", () -> c().queryRoute(route("NoSuchTopicBadInput")).getStatus());
        unary("queryRoute.illegalTopic", () -> c().queryRoute(route("bad topic!")).getStatus());
        unary("queryRoute.longTopic", () -> c().queryRoute(route("T".repeat(128))).getStatus());
        unary("queryRoute.noEndpoints", () -> c().queryRoute(route(normal).toBuilder().clearEndpoints().build())
            .getStatus());
        unary("queryRoute.noClientId", () -> anonymous.withDeadlineAfter(10, TimeUnit.SECONDS)
            .queryRoute(route(normal)).getStatus());
        unary("send.noClientId", () -> anonymous.withDeadlineAfter(10, TimeUnit.SECONDS)
            .sendMessage(send(message(normal).build())).getStatus());
        unary("send.unknownTopic", () -> c().sendMessage(send(message("NoSuchTopicBadInput").build())).getStatus());
        unary("send.illegalTopic", () -> c().sendMessage(send(message("bad topic!").build())).getStatus());
        unary("send.noMessages", () -> c().sendMessage(SendMessageRequest.newBuilder().build()).getStatus());
        // Wrong message type for the topic.
        unary("send.fifoToNormal", () -> c().sendMessage(send(message(normal, sp -> sp.setMessageGroup("g1")
            .setMessageType(MessageType.FIFO)).build())).getStatus());
        unary("send.normalToFifo", () -> c().sendMessage(send(message(fifo).build())).getStatus());
        unary("send.delayToNormal", () -> c().sendMessage(send(message(normal, sp -> sp.setMessageType(MessageType.DELAY)
            .setDeliveryTimestamp(Timestamps.fromMillis(System.currentTimeMillis() + 60_000))).build())).getStatus());
        unary("send.transactionToNormal", () -> c().sendMessage(send(message(normal, sp -> sp
            .setMessageType(MessageType.TRANSACTION)).build())).getStatus());
        // Sizes and contents.
        unary("send.emptyBody", () -> c().sendMessage(send(message(normal).setBody(ByteString.EMPTY).build())).getStatus());
        unary("send.oversizeBody", () -> c().sendMessage(send(message(normal)
            .setBody(ByteString.copyFrom(new byte[4 * 1024 * 1024 + 1])).build())).getStatus());
        unary("send.longProperty", () -> c().sendMessage(send(message(normal)
            .putUserProperties("k", "v".repeat(17 * 1024)).build())).getStatus());
        unary("send.longTag", () -> c().sendMessage(send(message(normal, sp -> sp.setTag("t".repeat(17 * 1024))).build()))
            .getStatus());
        unary("send.longKeys", () -> c().sendMessage(send(message(normal, sp -> sp.addKeys("k".repeat(9 * 1024))
            .addKeys("j".repeat(9 * 1024))).build())).getStatus());
        unary("send.systemProperty", () -> c().sendMessage(send(message(normal).putUserProperties("UNIQ_KEY", "x")
            .build())).getStatus());
        unary("send.tagWithBar", () -> c().sendMessage(send(message(normal, sp -> sp.setTag("a|b")).build())).getStatus());
        unary("send.blankKey", () -> c().sendMessage(send(message(normal, sp -> sp.addKeys("  ")).build())).getStatus());
        unary("send.noMessageId", () -> c().sendMessage(send(message(normal, sp -> sp.setMessageId("")).build()))
            .getStatus());
        unary("send.longMessageGroup", () -> c().sendMessage(send(message(fifo, sp -> sp.setMessageGroup("g".repeat(64))
            .setMessageType(MessageType.FIFO)).build())).getStatus());
        unary("send.delayBeyondMax", () -> c().sendMessage(send(message(normal, sp -> sp.setMessageType(MessageType.DELAY)
            .setDeliveryTimestamp(Timestamps.fromMillis(System.currentTimeMillis() + 40L * 24 * 3600 * 1000))).build()))
            .getStatus());
        // Other RPCs' refusals.
        unary("heartbeat.noSettings", () -> c().heartbeat(apache.rocketmq.v2.HeartbeatRequest.newBuilder()
            .setClientType(ClientType.PRODUCER).build()).getStatus());
        unary("assignment.unknownTopic", () -> c().queryAssignment(assignment("NoSuchTopicBadInput", group)).getStatus());
        unary("assignment.illegalGroup", () -> c().queryAssignment(assignment(normal, "bad group!")).getStatus());
        unary("assignment.noEndpoints", () -> c().queryAssignment(assignment(normal, group).toBuilder().clearEndpoints()
            .build()).getStatus());
        unary("endTransaction.unknownId", () -> c().endTransaction(apache.rocketmq.v2.EndTransactionRequest.newBuilder()
            .setTopic(res(normal)).setMessageId("0A0000000000000000000000000000AA").setTransactionId("no-such-tx")
            .setResolution(apache.rocketmq.v2.TransactionResolution.COMMIT).build()).getStatus());
        unary("endTransaction.illegalTopic", () -> c().endTransaction(apache.rocketmq.v2.EndTransactionRequest.newBuilder()
            .setTopic(res("bad topic!")).setTransactionId("no-such-tx").build()).getStatus());
        unary("notify.noClientId", () -> anonymous.withDeadlineAfter(10, TimeUnit.SECONDS).notifyClientTermination(
            apache.rocketmq.v2.NotifyClientTerminationRequest.newBuilder().setGroup(res(group)).build()).getStatus());
        // Receives: without client settings, then with them.
        receive("receive.noSettings", receiveRequest(normal, group, 16, 10_000));
        CountDownLatch settled = new CountDownLatch(1);
        AtomicReference<String> settingsStatus = new AtomicReference<>("none");
        StreamObserver<TelemetryCommand> telemetry = async.telemetry(new StreamObserver<>() {
            @Override
            public void onNext(TelemetryCommand value) {
                settingsStatus.set(value.getStatus().getCode().name());
                settled.countDown();
            }

            @Override
            public void onError(Throwable t) {
                settingsStatus.set("error " + io.grpc.Status.fromThrowable(t).getCode());
                settled.countDown();
            }

            @Override
            public void onCompleted() {
                settled.countDown();
            }
        });
        telemetry.onNext(TelemetryCommand.newBuilder().setSettings(Settings.newBuilder()
            .setClientType(ClientType.SIMPLE_CONSUMER).setAccessPoint(endpoints)
            .setRequestTimeout(Durations.fromSeconds(3))
            .setUserAgent(UA.newBuilder().setLanguage(Language.JAVA).setVersion("5.0.8"))
            .setSubscription(Subscription.newBuilder().setGroup(res(group)).addSubscriptions(SubscriptionEntry.newBuilder()
                .setTopic(res(normal)).setExpression(FilterExpression.newBuilder().setType(FilterType.TAG)
                    .setExpression("*"))))).build());
        if (!settled.await(10, TimeUnit.SECONDS)) {
            settingsStatus.set("no answer");
        }
        System.out.println("SETTINGS " + settingsStatus.get());
        unary("forward.malformedHandle", () -> c().forwardMessageToDeadLetterQueue(
            apache.rocketmq.v2.ForwardMessageToDeadLetterQueueRequest.newBuilder().setTopic(res(normal)).setGroup(res(group))
                .setReceiptHandle("not-a-handle").setMessageId("0A0000000000000000000000000000AA").build()).getStatus());
        // Receipt handles.
        String expired = "0 1000 1000 0 0 " + broker + " 0 0 0";
        String future = "0 " + System.currentTimeMillis() + " 60000 0 0 " + broker + " 0 0 0";
        unary("ack.malformedHandle", () -> c().ackMessage(ack(normal, group, "not-a-handle")).getStatus());
        unary("ack.expiredHandle", () -> c().ackMessage(ack(normal, group, expired)).getStatus());
        unary("ack.illegalGroup", () -> c().ackMessage(ack(normal, "bad group!", future)).getStatus());
        unary("ack.noEntries", () -> c().ackMessage(AckMessageRequest.newBuilder().setTopic(res(normal))
            .setGroup(res(group)).build()).getStatus());
        unary("change.malformedHandle", () -> c().changeInvisibleDuration(change(normal, group, "not-a-handle", 10_000))
            .getStatus());
        unary("change.expiredHandle", () -> c().changeInvisibleDuration(change(normal, group, expired, 10_000))
            .getStatus());
        unary("change.invisibleTooLarge", () -> c().changeInvisibleDuration(change(normal, group, future,
            13L * 3600 * 1000)).getStatus());
        unary("change.invisibleNegative", () -> c().changeInvisibleDuration(change(normal, group, future, -1))
            .getStatus());
        receive("receive.invisibleTooSmall", receiveRequest(normal, group, 16, 10));
        receive("receive.invisibleTooLarge", receiveRequest(normal, group, 16, 13L * 3600 * 1000));
        receive("receive.batchZero", receiveRequest(normal, group, 0, 10_000));
        receive("receive.batchNegative", receiveRequest(normal, group, -1, 10_000));
        receive("receive.batchTooLarge", receiveRequest(normal, group, 1000, 10_000));
        receive("receive.illegalGroup", receiveRequest(normal, "bad group!", 16, 10_000));
        receive("receive.unknownTopic", receiveRequest("NoSuchTopicBadInput", group, 16, 10_000));
        receive("receive.illegalFilter", receiveRequest(normal, group, 16, 10_000).toBuilder()
            .setFilterExpression(FilterExpression.newBuilder().setType(FilterType.SQL).setExpression("a >< ")).build());
        // Recall, and the RPCs 5.3.3 does not serve.
        unary("recall.normalTopic", () -> c().recallMessage(recall(normal, "not-a-handle")).getStatus());
        unary("recall.malformedHandle", () -> c().recallMessage(recall(delay, "not-a-handle")).getStatus());
        unary("recall.emptyHandle", () -> c().recallMessage(recall(delay, "")).getStatus());
        unary("recall.unknownMessage", () -> c().recallMessage(recall(delay, java.util.Base64.getUrlEncoder()
            .encodeToString(("v1 " + delay + " " + broker + " " + (System.currentTimeMillis() + 60_000)
                + " 0A0000000000000000000000000000AA").getBytes(java.nio.charset.StandardCharsets.UTF_8)))).getStatus());
        unary("recall.pastHandle", () -> c().recallMessage(recall(delay, java.util.Base64.getUrlEncoder()
            .encodeToString(("v1 " + delay + " " + broker + " 1000 0A0000000000000000000000000000AA")
                .getBytes(java.nio.charset.StandardCharsets.UTF_8)))).getStatus());
        unary("recall.illegalTopic", () -> c().recallMessage(RecallMessageRequest.newBuilder().setTopic(res("bad topic!"))
            .setRecallHandle("not-a-handle").build()).getStatus());
        unary("updateOffset", () -> c().updateOffset(UpdateOffsetRequest.newBuilder().build()).getStatus());
        unary("getOffset", () -> c().getOffset(GetOffsetRequest.newBuilder().build()).getStatus());
        unary("queryOffset", () -> c().queryOffset(QueryOffsetRequest.newBuilder().build()).getStatus());
        unary("pullMessage", () -> {
            Iterator<?> it = c().pullMessage(PullMessageRequest.newBuilder().build());
            while (it.hasNext()) {
                it.next();
            }
            return Status.newBuilder().setCodeValue(20000).setMessage("stream ended").build();
        });
        // Not protobuf: raw bytes as the request message.
        raw("raw.garbage", "SendMessage", new byte[] {(byte) 0xFF, (byte) 0xFF, (byte) 0xFF, (byte) 0xFF});
        byte[] whole = send(message(normal).build()).toByteArray();
        raw("raw.truncated", "SendMessage", java.util.Arrays.copyOf(whole, whole.length / 2));
        raw("raw.truncatedRoute", "QueryRoute", java.util.Arrays.copyOf(route(normal).toByteArray(), 3));
        telemetry.onCompleted();
    }

    /** Sends {@code body} as the request message of unary {@code method}, with no protobuf encoding. */
    private void raw(String name, String method, byte[] body) {
        io.grpc.MethodDescriptor.Marshaller<byte[]> bytes = new io.grpc.MethodDescriptor.Marshaller<>() {
            @Override
            public java.io.InputStream stream(byte[] value) {
                return new java.io.ByteArrayInputStream(value);
            }

            @Override
            public byte[] parse(java.io.InputStream stream) {
                try {
                    return stream.readAllBytes();
                } catch (java.io.IOException e) {
                    throw new java.io.UncheckedIOException(e);
                }
            }
        };
        io.grpc.MethodDescriptor<byte[], byte[]> descriptor = io.grpc.MethodDescriptor.<byte[], byte[]>newBuilder()
            .setType(io.grpc.MethodDescriptor.MethodType.UNARY)
            .setFullMethodName("apache.rocketmq.v2.MessagingService/" + method)
            .setRequestMarshaller(bytes).setResponseMarshaller(bytes).build();
        unary(name, () -> {
            byte[] answer = io.grpc.stub.ClientCalls.blockingUnaryCall(c().getChannel(), descriptor,
                c().getCallOptions(), body);
            return Status.newBuilder().setCodeValue(20000).setMessage("answered " + answer.length + " bytes").build();
        });
    }

    private RecallMessageRequest recall(String topic, String handle) {
        return RecallMessageRequest.newBuilder().setTopic(res(topic)).setRecallHandle(handle).build();
    }

    private Resource res(String name) {
        return Resource.newBuilder().setName(name).build();
    }

    private apache.rocketmq.v2.QueryAssignmentRequest assignment(String topic, String group) {
        return apache.rocketmq.v2.QueryAssignmentRequest.newBuilder().setTopic(res(topic)).setGroup(res(group))
            .setEndpoints(endpoints).build();
    }

    private QueryRouteRequest route(String topic) {
        return QueryRouteRequest.newBuilder().setTopic(res(topic)).setEndpoints(endpoints).build();
    }

    private SendMessageRequest send(Message m) {
        return SendMessageRequest.newBuilder().addMessages(m).build();
    }

    private Message.Builder message(String topic) {
        return message(topic, sp -> sp);
    }

    private Message.Builder message(String topic, java.util.function.UnaryOperator<SystemProperties.Builder> props) {
        SystemProperties.Builder sp = SystemProperties.newBuilder().setMessageId(UUID.randomUUID().toString().replace("-", ""))
            .setMessageType(MessageType.NORMAL).setBornHost("127.0.0.1")
            .setBornTimestamp(Timestamps.fromMillis(System.currentTimeMillis()));
        return Message.newBuilder().setTopic(res(topic)).setSystemProperties(props.apply(sp))
            .setBody(ByteString.copyFromUtf8("bad input"));
    }

    private AckMessageRequest ack(String topic, String group, String handle) {
        return AckMessageRequest.newBuilder().setTopic(res(topic)).setGroup(res(group))
            .addEntries(AckMessageEntry.newBuilder().setMessageId("0A0000000000000000000000000000AA").setReceiptHandle(handle))
            .build();
    }

    private ChangeInvisibleDurationRequest change(String topic, String group, String handle, long invisibleMs) {
        return ChangeInvisibleDurationRequest.newBuilder().setTopic(res(topic)).setGroup(res(group))
            .setReceiptHandle(handle).setMessageId("0A0000000000000000000000000000AA")
            .setInvisibleDuration(Durations.fromMillis(invisibleMs)).build();
    }

    private ReceiveMessageRequest receiveRequest(String topic, String group, int batch, long invisibleMs) {
        return ReceiveMessageRequest.newBuilder().setGroup(res(group))
            .setMessageQueue(MessageQueue.newBuilder().setTopic(res(topic)).setBroker(Broker.newBuilder().setName("")))
            .setFilterExpression(FilterExpression.newBuilder().setType(FilterType.TAG).setExpression("*"))
            .setBatchSize(batch).setInvisibleDuration(Durations.fromMillis(invisibleMs)).setAutoRenew(false)
            .setLongPollingTimeout(Durations.fromSeconds(1)).build();
    }

    private void receive(String name, ReceiveMessageRequest request) {
        unary(name, () -> {
            Iterator<ReceiveMessageResponse> it = c().receiveMessage(request);
            Status status = null;
            int messages = 0;
            while (it.hasNext()) {
                ReceiveMessageResponse r = it.next();
                if (r.hasStatus() && status == null) {
                    status = r.getStatus();
                } else if (r.hasMessage()) {
                    messages++;
                }
            }
            Status s = status == null ? Status.newBuilder().setMessage("no status").build() : status;
            return messages == 0 ? s : s.toBuilder().setMessage(s.getMessage() + " (+" + messages + " messages)").build();
        });
    }

    private static void unary(String name, Supplier<Status> call) {
        String line;
        try {
            Status s = call.get();
            line = "grpc=OK code=" + s.getCode() + " message=" + s.getMessage();
        } catch (StatusRuntimeException e) {
            line = "grpc=" + e.getStatus().getCode() + " code=- message=" + e.getStatus().getDescription();
        } catch (RuntimeException e) {
            line = "grpc=? code=- message=" + e;
        }
        System.out.println("CASE " + name + " " + line.replace('\n', ' '));
    }
}
