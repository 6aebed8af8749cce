/*
 * Golden JSON bodies and a live peer for DLedger 0.3.1.2's RPCs, from the real Java classes.
 *
 * Modes:
 *   generate <out-dir>
 *       Serializes one instance of every request and response class of io.openmessaging.storage.dledger.protocol
 *       (with entries, batch entries and every enum value where it matters) with JSON.toJSONBytes, as
 *       DLedgerRpcNettyService and DLedgerClientRpcNettyService put them in remoting bodies, to
 *       <out>/encode/<name>.json. Then parses a set of hand-written inputs with JSON.parseObject(bytes, Class)
 *       (what DLedger does with a received body) and writes what Java read, serialized again, to
 *       <out>/decode/<name>.out.json next to the input <name>.in.json. <out>/manifest.json lists both.
 *   server <store-dir> <group> <self-id> <peers>
 *       Starts a real DLedgerServer with that config, prints "READY" once started, and shuts it down when
 *       standard input closes.
 *   client <group> <peers> <remote-id> <index>
 *       Asks <remote-id> for METADATA through DLedgerClientRpcNettyService, then runs DLedgerClient.get(<index>)
 *       (whose leader discovery asks for METADATA too) and prints one line per answer:
 *       "METADATA <json>" and "GET <json>".
 *
 * Usage: run.sh <classpath-name> <mode> <args...>
 */

import com.alibaba.fastjson.JSON;
import io.openmessaging.storage.dledger.DLedgerConfig;
import io.openmessaging.storage.dledger.DLedgerServer;
import io.openmessaging.storage.dledger.client.DLedgerClient;
import io.openmessaging.storage.dledger.client.DLedgerClientRpcNettyService;
import io.openmessaging.storage.dledger.entry.DLedgerEntry;
import io.openmessaging.storage.dledger.protocol.AppendEntryRequest;
import io.openmessaging.storage.dledger.protocol.AppendEntryResponse;
import io.openmessaging.storage.dledger.protocol.DLedgerResponseCode;
import io.openmessaging.storage.dledger.protocol.GetEntriesRequest;
import io.openmessaging.storage.dledger.protocol.GetEntriesResponse;
import io.openmessaging.storage.dledger.protocol.HeartBeatRequest;
import io.openmessaging.storage.dledger.protocol.HeartBeatResponse;
import io.openmessaging.storage.dledger.protocol.LeadershipTransferRequest;
import io.openmessaging.storage.dledger.protocol.LeadershipTransferResponse;
import io.openmessaging.storage.dledger.protocol.MetadataRequest;
import io.openmessaging.storage.dledger.protocol.MetadataResponse;
import io.openmessaging.storage.dledger.protocol.PullEntriesRequest;
import io.openmessaging.storage.dledger.protocol.PullEntriesResponse;
import io.openmessaging.storage.dledger.protocol.PushEntryRequest;
import io.openmessaging.storage.dledger.protocol.PushEntryResponse;
import io.openmessaging.storage.dledger.protocol.RequestOrResponse;
import io.openmessaging.storage.dledger.protocol.VoteRequest;
import io.openmessaging.storage.dledger.protocol.VoteResponse;
import java.io.InputStream;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

public final class DLedgerGolden {

    public static void main(String[] args) throws Exception {
        if (args.length < 1) {
            throw new IllegalArgumentException("usage: DLedgerGolden generate|server|client ...");
        }
        switch (args[0]) {
            case "generate":
                generate(Paths.get(args[1]));
                break;
            case "server":
                server(args[1], args[2], args[3], args[4]);
                break;
            case "client":
                client(args[1], args[2], args[3], Long.parseLong(args[4]));
                break;
            default:
                throw new IllegalArgumentException("unknown mode " + args[0]);
        }
    }

    // ---------------------------------------------------------------- generate

    private static final List<Map<String, Object>> manifest = new ArrayList<>();

    private static void encode(Path out, String name, String description, RequestOrResponse value) throws Exception {
        byte[] bytes = JSON.toJSONBytes(value);
        Files.write(out.resolve("encode").resolve(name + ".json"), bytes);
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("kind", "encode");
        m.put("name", name);
        m.put("class", value.getClass().getSimpleName());
        m.put("description", description);
        manifest.add(m);
    }

    private static void decode(Path out, String name, String description, Class<? extends RequestOrResponse> clazz, String input)
        throws Exception {
        byte[] in = input.getBytes(StandardCharsets.UTF_8);
        RequestOrResponse parsed = JSON.parseObject(in, clazz);
        byte[] again = JSON.toJSONBytes(parsed);
        Files.write(out.resolve("decode").resolve(name + ".in.json"), in);
        Files.write(out.resolve("decode").resolve(name + ".out.json"), again);
        Map<String, Object> m = new LinkedHashMap<>();
        m.put("kind", "decode");
        m.put("name", name);
        m.put("class", clazz.getSimpleName());
        m.put("description", description);
        manifest.add(m);
    }

    private static DLedgerEntry entry(long index, long term, long pos, byte[] body) {
        DLedgerEntry e = new DLedgerEntry();
        e.setMagic(1);
        e.setIndex(index);
        e.setTerm(term);
        e.setPos(pos);
        e.setBody(body);
        e.computeSizeInBytes();
        return e;
    }

    private static byte[] allBytes() {
        byte[] b = new byte[256];
        for (int i = 0; i < b.length; i++) {
            b[i] = (byte) i;
        }
        return b;
    }

    private static <T extends RequestOrResponse> T base(T r, String group, String remoteId, String localId, String leaderId, long term) {
        r.setGroup(group);
        r.setRemoteId(remoteId);
        r.setLocalId(localId);
        r.setLeaderId(leaderId);
        r.setTerm(term);
        return r;
    }

    /** MemberState's peer map: a HashMap filled in the order of the peers string. */
    private static Map<String, String> peerMap(int n) {
        Map<String, String> peers = new HashMap<>();
        for (int i = 0; i < n; i++) {
            peers.put("n" + i, "127.0.0.1:" + (40911 + i));
        }
        return peers;
    }

    private static void generate(Path out) throws Exception {
        Files.createDirectories(out.resolve("encode"));
        Files.createDirectories(out.resolve("decode"));
        byte[] hello = "hello, dledger".getBytes(StandardCharsets.UTF_8);

        // METADATA
        MetadataRequest metadataRequest = new MetadataRequest();
        metadataRequest.setGroup("g");
        metadataRequest.setRemoteId("n1");
        encode(out, "metadata_request", "what DLedgerClient's MetadataUpdater sends: group and remoteId only", metadataRequest);

        MetadataResponse metadata = new MetadataResponse();
        metadata.setGroup("g");
        metadata.setPeers(peerMap(3));
        metadata.setLeaderId("n0");
        encode(out, "metadata_response", "DLedgerServer.handleMetadata: group, peers (MemberState's HashMap), leaderId", metadata);

        MetadataResponse metadata13 = new MetadataResponse();
        metadata13.setGroup("g");
        metadata13.setPeers(peerMap(13));
        metadata13.setLeaderId("n12");
        encode(out, "metadata_response_13_peers", "13 peers: HashMap order after a resize, not sorted", metadata13);

        MetadataResponse metadataNoLeader = new MetadataResponse();
        metadataNoLeader.setGroup("g");
        metadataNoLeader.setPeers(peerMap(3));
        encode(out, "metadata_response_no_leader", "no leader known yet: leaderId omitted", metadataNoLeader);

        MetadataResponse metadataError = new MetadataResponse();
        metadataError.copyBaseInfo(metadataRequest);
        metadataError.setCode(DLedgerResponseCode.UNKNOWN_MEMBER.getCode());
        metadataError.setLeaderId("n0");
        encode(out, "metadata_response_unknown_member", "error path: request's base copied, code 401, leaderId of the node", metadataError);

        // APPEND
        AppendEntryRequest append = base(new AppendEntryRequest(), "g", "n0", null, null, -1);
        append.setBody(allBytes());
        encode(out, "append_request", "DLedgerClient.append: every byte value in the body (base64)", append);

        AppendEntryRequest appendEmpty = base(new AppendEntryRequest(), "g", "n0", null, null, -1);
        appendEmpty.setBody(new byte[0]);
        encode(out, "append_request_empty_body", "an empty body is an empty base64 string", appendEmpty);

        AppendEntryRequest appendHello = base(new AppendEntryRequest(), "g", "n0", null, null, -1);
        appendHello.setBody(hello);
        encode(out, "append_request_hello", "a body whose base64 needs padding", appendHello);

        AppendEntryResponse appended = new AppendEntryResponse();
        appended.setGroup("g");
        appended.setTerm(3);
        appended.setIndex(5);
        appended.setPos(4096);
        appended.setLeaderId("n0");
        encode(out, "append_response", "quorum ack: group, term, index, pos, leaderId", appended);

        AppendEntryResponse pendingFull = new AppendEntryResponse();
        pendingFull.setGroup("g");
        pendingFull.setCode(DLedgerResponseCode.LEADER_PENDING_FULL.getCode());
        pendingFull.setTerm(3);
        pendingFull.setLeaderId("n0");
        encode(out, "append_response_pending_full", "LEADER_PENDING_FULL: index and pos stay -1", pendingFull);

        AppendEntryResponse notLeader = new AppendEntryResponse();
        notLeader.copyBaseInfo(append);
        notLeader.setCode(DLedgerResponseCode.NOT_LEADER.getCode());
        notLeader.setLeaderId("n2");
        encode(out, "append_response_not_leader", "error path of handleAppend: NOT_LEADER naming the leader", notLeader);

        // GET
        GetEntriesRequest get = base(new GetEntriesRequest(), "g", "n0", null, null, -1);
        get.setBeginIndex(7L);
        encode(out, "get_request", "DLedgerClient.get: beginIndex, maxSize 0, no indexList", get);

        GetEntriesRequest getList = base(new GetEntriesRequest(), "g", "n0", "n1", "n0", 2);
        getList.setMaxSize(1024);
        getList.setIndexList(Arrays.asList(1L, 2L, 3L));
        encode(out, "get_request_index_list", "indexList and maxSize set, beginIndex null", getList);

        GetEntriesResponse got = new GetEntriesResponse();
        got.setGroup("g");
        got.setEntries(java.util.Collections.singletonList(entry(7, 2, 7 * 1024, hello)));
        encode(out, "get_response", "handleGet: group and one entry", got);

        GetEntriesResponse gotNone = new GetEntriesResponse();
        gotNone.setGroup("g");
        encode(out, "get_response_empty", "no such entry: entries stays an empty list", gotNone);

        // VOTE
        VoteRequest vote = base(new VoteRequest(), "g", "n1", "n0", "n0", 4);
        vote.setLedgerEndIndex(99);
        vote.setLedgerEndTerm(3);
        encode(out, "vote_request", "candidate n0 at term 4 asks n1", vote);

        VoteRequest voteExtremes = base(new VoteRequest(), "g", "n1", "n0", "n0", Long.MAX_VALUE);
        voteExtremes.setLedgerEndIndex(Long.MIN_VALUE);
        voteExtremes.setLedgerEndTerm(-1);
        voteExtremes.setCode(Integer.MIN_VALUE);
        encode(out, "vote_request_extremes", "longs beyond 2^53 stay plain numbers", voteExtremes);

        for (VoteResponse.RESULT result : VoteResponse.RESULT.values()) {
            VoteResponse r = new VoteResponse(vote);
            r.voteResult(result).term(5);
            encode(out, "vote_response_" + result.name().toLowerCase(), "VoteResponse with voteResult " + result.name(), r);
        }

        // HEART_BEAT
        HeartBeatRequest heartBeat = base(new HeartBeatRequest(), "g", "n1", "n0", "n0", 4);
        encode(out, "heart_beat_request", "leader n0 at term 4", heartBeat);
        encode(out, "heart_beat_response_success", "a fresh HeartBeatResponse: code and term only", new HeartBeatResponse());
        encode(out, "heart_beat_response_expired_term", "EXPIRED_TERM with the follower's term",
            new HeartBeatResponse().term(6).code(DLedgerResponseCode.EXPIRED_TERM.getCode()));

        // PUSH
        for (PushEntryRequest.Type type : PushEntryRequest.Type.values()) {
            PushEntryRequest push = base(new PushEntryRequest(), "g", "n1", "n0", "n0", 4);
            push.setType(type);
            push.setCommitIndex(10);
            if (type != PushEntryRequest.Type.COMMIT) {
                push.setEntry(entry(11, 4, 11 * 100, hello));
            }
            encode(out, "push_request_" + type.name().toLowerCase(), "PUSH " + type.name() + " as DLedgerEntryPusher builds it", push);
        }
        PushEntryRequest batch = base(new PushEntryRequest(), "g", "n1", "n0", "n0", 4);
        batch.setType(PushEntryRequest.Type.APPEND);
        batch.setCommitIndex(10);
        for (int i = 0; i < 3; i++) {
            batch.addEntry(entry(11 + i, 4, 1000 + 100 * i, Arrays.copyOf(hello, i + 1)));
        }
        encode(out, "push_request_batch", "batch push: batchEntry, batch=true, count, totalSize", batch);

        PushEntryResponse pushed = new PushEntryResponse();
        pushed.setGroup("g");
        pushed.setTerm(4);
        pushed.setIndex(11L);
        pushed.setCount(1);
        pushed.setBeginIndex(0);
        pushed.setEndIndex(11);
        encode(out, "push_response", "EntryHandler.buildResponse for an APPEND", pushed);

        PushEntryResponse commitAck = new PushEntryResponse();
        commitAck.setGroup("g");
        commitAck.setTerm(4);
        commitAck.setCode(DLedgerResponseCode.INCONSISTENT_STATE.getCode());
        commitAck.setBeginIndex(-1);
        commitAck.setEndIndex(-1);
        encode(out, "push_response_no_index", "a COMMIT's answer: index null is omitted", commitAck);

        // LEADERSHIP_TRANSFER
        LeadershipTransferRequest transfer = base(new LeadershipTransferRequest(), "g", "n1", "n0", "n0", 4);
        transfer.setTransferId("n0");
        transfer.setTransfereeId("n1");
        transfer.setTakeLeadershipLedgerIndex(42);
        encode(out, "leadership_transfer_request", "leader n0 hands over to n1", transfer);

        LeadershipTransferRequest adminTransfer = base(new LeadershipTransferRequest(), "g", "n0", null, null, 4);
        adminTransfer.setTransferId("n0");
        adminTransfer.setTransfereeId("n1");
        encode(out, "leadership_transfer_request_admin", "what DLedgerClient.leadershipTransfer sends", adminTransfer);

        LeadershipTransferResponse transferred = new LeadershipTransferResponse().term(5);
        encode(out, "leadership_transfer_response", "a fresh response with a term", transferred);

        LeadershipTransferResponse transferFailed = new LeadershipTransferResponse();
        transferFailed.copyBaseInfo(transfer);
        transferFailed.setCode(DLedgerResponseCode.TAKE_LEADERSHIP_FAILED.getCode());
        encode(out, "leadership_transfer_response_failed", "TAKE_LEADERSHIP_FAILED with the request's base", transferFailed);

        // PULL (registered, never served by 0.3.1.2)
        PullEntriesRequest pull = base(new PullEntriesRequest(), "g", "n0", "n1", null, 4);
        pull.setNodeId("n1");
        pull.setBeginIndex(3L);
        encode(out, "pull_request", "PULL: nodeId, beginIndex", pull);

        PullEntriesResponse pulled = new PullEntriesResponse();
        pulled.setGroup("g");
        pulled.setEntries(Arrays.asList(entry(3, 1, 300, hello), entry(4, 1, 362, new byte[0])));
        encode(out, "pull_response", "PULL's response class: entries", pulled);

        // Strings: fastjson's escapes in a body.
        HeartBeatRequest zoo = base(new HeartBeatRequest(), "g\"\\/\b\f\n\r\t\u0001\u001f\u007f\u0085\u2028\u2029é组😀", "n1", "n0", "n0", 4);
        encode(out, "string_escape_zoo", "quotes, backslash, controls, DEL, C1, line separators, non-ASCII raw", zoo);

        // ------------------------------------------------------------ decode: what Java reads
        String[][] empty = {
            {"MetadataRequest"}, {"MetadataResponse"}, {"AppendEntryRequest"}, {"AppendEntryResponse"},
            {"GetEntriesRequest"}, {"GetEntriesResponse"}, {"VoteRequest"}, {"VoteResponse"}, {"HeartBeatRequest"},
            {"HeartBeatResponse"}, {"PushEntryRequest"}, {"PushEntryResponse"}, {"LeadershipTransferRequest"},
            {"LeadershipTransferResponse"}, {"PullEntriesRequest"}, {"PullEntriesResponse"},
        };
        for (String[] e : empty) {
            @SuppressWarnings("unchecked")
            Class<? extends RequestOrResponse> c =
                (Class<? extends RequestOrResponse>) Class.forName("io.openmessaging.storage.dledger.protocol." + e[0]);
            decode(out, "empty_" + e[0].toLowerCase(), "{} : every field takes Java's default", c, "{}");
        }
        decode(out, "unknown_keys", "unknown keys, nested values among them, are skipped", HeartBeatRequest.class,
            "{\"zzz\":1,\"group\":\"g\",\"nested\":{\"a\":[1,{\"b\":null}],\"c\":\"}\"},\"term\":3,\"list\":[[],{}],\"aaa\":true}");
        decode(out, "computed_keys_ignored", "batch/count/firstEntryIndex/lastEntryIndex/totalSize have no setter",
            PushEntryRequest.class,
            "{\"batch\":true,\"count\":99,\"firstEntryIndex\":5,\"lastEntryIndex\":6,\"totalSize\":12345,\"type\":\"COMPARE\","
                + "\"entry\":{\"body\":\"aGk=\",\"index\":2,\"magic\":1,\"pos\":100,\"size\":50,\"term\":1},\"group\":\"g\",\"term\":1}");
        decode(out, "batch_entry_filled", "batchEntry has only a getter: fastjson fills the list it returns",
            PushEntryRequest.class,
            "{\"batchEntry\":[{\"body\":\"aGk=\",\"index\":2,\"magic\":1,\"pos\":100,\"size\":50,\"term\":1},"
                + "{\"body\":\"\",\"index\":3,\"magic\":1,\"pos\":150,\"size\":48,\"term\":1}],\"commitIndex\":1,\"group\":\"g\",\"term\":1}");
        decode(out, "numbers_as_strings", "numbers written as strings", VoteRequest.class,
            "{\"code\":\"404\",\"term\":\"7\",\"ledgerEndIndex\":\"-3\",\"ledgerEndTerm\":\"2\",\"group\":\"g\"}");
        decode(out, "null_values", "null for primitives and objects", VoteRequest.class,
            "{\"code\":null,\"term\":null,\"ledgerEndIndex\":null,\"group\":null,\"leaderId\":null,\"remoteId\":\"n1\"}");
        decode(out, "null_values_push", "null entry, batchEntry and type", PushEntryRequest.class,
            "{\"entry\":null,\"batchEntry\":null,\"commitIndex\":null,\"group\":\"g\",\"term\":1}");
        decode(out, "enum_ordinal_push", "an enum as its ordinal", PushEntryRequest.class, "{\"type\":2,\"group\":\"g\"}");
        decode(out, "enum_ordinal_vote", "an enum as its ordinal", VoteResponse.class, "{\"voteResult\":1,\"group\":\"g\"}");
        decode(out, "duplicate_keys", "the last of duplicate keys wins", HeartBeatRequest.class,
            "{\"term\":1,\"group\":\"a\",\"term\":2,\"group\":\"b\"}");
        decode(out, "whitespace", "whitespace between tokens", MetadataResponse.class,
            " {\n\t\"group\" : \"g\" ,\r\n \"peers\" : { \"n0\" : \"127.0.0.1:1\" , \"n1\":\"127.0.0.1:2\" } , \"code\" : 200 }\n");
        decode(out, "unquoted_keys", "bare field names", AppendEntryResponse.class, "{index:5,pos:6,group:\"g\"}");
        decode(out, "base64_unpadded", "base64 without padding", AppendEntryRequest.class, "{\"body\":\"aGVsbG8\",\"group\":\"g\"}");
        decode(out, "unicode_escapes", "\\u escapes in strings", HeartBeatRequest.class,
            "{\"group\":\"\\u0067\\u00e9\\ud83d\\ude00\",\"leaderId\":\"n\\/0\"}");
        decode(out, "get_response_entries", "entries with every field", GetEntriesResponse.class,
            "{\"entries\":[{\"body\":\"AAH/\",\"bodyCrc\":7,\"chainCrc\":8,\"channel\":9,\"index\":1,\"magic\":1,\"pos\":48,\"size\":51,\"term\":2}],\"group\":\"g\"}");

        Files.write(out.resolve("manifest.json"), JSON.toJSONBytes(manifest, com.alibaba.fastjson.serializer.SerializerFeature.PrettyFormat));
    }

    // ---------------------------------------------------------------- server

    private static void server(String storeDir, String group, String selfId, String peers) throws Exception {
        DLedgerConfig config = new DLedgerConfig();
        config.setGroup(group);
        config.setSelfId(selfId);
        config.setPeers(peers);
        config.setStoreBaseDir(storeDir);
        config.setMappedFileSizeForEntryData(1024 * 1024);
        config.setMappedFileSizeForEntryIndex(32 * 1024);
        DLedgerServer server = new DLedgerServer(config);
        server.startup();
        System.out.println("READY");
        System.out.flush();
        InputStream in = System.in;
        while (in.read() >= 0) {
            // Runs until the driver closes our standard input.
        }
        server.shutdown();
        System.exit(0);
    }

    // ---------------------------------------------------------------- client

    private static void client(String group, String peers, String remoteId, long index) throws Exception {
        DLedgerClientRpcNettyService rpc = new DLedgerClientRpcNettyService();
        rpc.updatePeers(peers);
        rpc.startup();
        MetadataRequest request = new MetadataRequest();
        request.setGroup(group);
        request.setRemoteId(remoteId);
        MetadataResponse metadata = rpc.metadata(request).get();
        System.out.println("METADATA " + JSON.toJSONString(metadata));
        rpc.shutdown();

        DLedgerClient client = new DLedgerClient(group, peers);
        client.startup();
        GetEntriesResponse got = client.get(index);
        System.out.println("GET " + JSON.toJSONString(got));
        System.out.flush();
        client.shutdown();
        System.exit(0);
    }
}
