//! 5.3.3's store and flow-control admin codes through the broker's socket, answered as Java's
//! `AdminBrokerProcessor` answers them on a broker with the file store and no controller: the
//! cold-data flow control config (2001-2003), the commit log's read-ahead mode (2004), a slave's
//! master flush offset (908), the RocksDB codes (354, 355) and the epoch cache (1007).

mod common;

use common::*;
use remoting::client::{ClientConfig, RemotingClient};
use remoting::{RemotingCommand, RequestCode, ResponseCode};

async fn call(c: &RemotingClient, addr: &str, request: RemotingCommand) -> (ResponseCode, Option<String>, String) {
    let r = c.invoke(addr, request, TIMEOUT).await.unwrap();
    (r.response_code(), r.remark.clone(), String::from_utf8_lossy(r.body_bytes()).into_owned())
}

fn with_body(code: RequestCode, body: &str) -> RemotingCommand {
    RemotingCommand::request(code).with_body(body.as_bytes().to_vec())
}

fn cold_info(config: &str) -> String {
    format!(r#"{{"runtimeTable":{{}},"configTable":{{{config}}},"cgColdReadThreshold":1234,"globalColdReadThreshold":104857600,"globalAcc":0}}"#)
}

#[tokio::test(flavor = "multi_thread")]
async fn cold_data_flow_control_groups_are_set_listed_and_removed_as_java() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("cgColdReadThreshold", "1234")]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    let info = || call(&c, &addr, RemotingCommand::request(RequestCode::GET_COLD_DATA_FLOW_CTR_INFO));

    assert_eq!(info().await, (ResponseCode::SUCCESS, None, cold_info("")));
    // mqadmin's body: Properties text, one group.
    let update = with_body(RequestCode::UPDATE_COLD_DATA_FLOW_CTR_CONFIG, "cgA=100\n");
    assert_eq!(call(&c, &addr, update).await, (ResponseCode::SUCCESS, None, String::new()));
    let update = with_body(RequestCode::UPDATE_COLD_DATA_FLOW_CTR_CONFIG, "cgA=200\ncgB=-1\n");
    assert_eq!(call(&c, &addr, update).await.0, ResponseCode::SUCCESS);
    // Java's table order: "cgA" hashes to bucket 12 of 16, "cgB" to 15.
    assert_eq!(info().await.2, cold_info(r#""cgA":200,"cgB":-1"#));

    // Entries Java skips (a threshold that is not a long) and names we refuse are skipped; the
    // answer is Java's SUCCESS, with a remark naming them.
    let update = with_body(RequestCode::UPDATE_COLD_DATA_FLOW_CTR_CONFIG, "cgC=lots\nbad/group=5\ncgD=7\n");
    let (code, remark, _) = call(&c, &addr, update).await;
    assert_eq!(code, ResponseCode::SUCCESS);
    let remark = remark.unwrap_or_default();
    assert!(remark.contains("cgC=lots") && remark.contains("bad/group=5") && !remark.contains("cgD"), "{remark}");
    let listed = info().await.2;
    assert!(listed.contains(r#""cgD":7"#) && !listed.contains(r#""cgC""#), "{listed}");
    // What Properties.load refuses: Java's string2Properties error.
    let update = with_body(RequestCode::UPDATE_COLD_DATA_FLOW_CTR_CONFIG, "cgE\\u00=1\n");
    assert_eq!(call(&c, &addr, update).await, (ResponseCode::SYSTEM_ERROR, Some("string2Properties error".into()), String::new()));
    // No body: nothing to do, SUCCESS.
    let empty = RemotingCommand::request(RequestCode::UPDATE_COLD_DATA_FLOW_CTR_CONFIG);
    assert_eq!(call(&c, &addr, empty).await.0, ResponseCode::SUCCESS);

    // Remove takes the body as the group; an unknown group changes nothing.
    for group in ["cgA", "cgD", "noSuchGroup", "../../etc"] {
        let remove = with_body(RequestCode::REMOVE_COLD_DATA_FLOW_CTR_CONFIG, group);
        assert_eq!(call(&c, &addr, remove).await, (ResponseCode::SUCCESS, None, String::new()), "{group}");
    }
    assert_eq!(info().await.2, cold_info(r#""cgB":-1"#));
    broker.shutdown().await;

    // Java keeps the table in memory only: a restart forgets it, and no file was written.
    let broker = start(dir.path(), &[("cgColdReadThreshold", "1234")]).await;
    let addr = broker.local_addr().to_string();
    assert_eq!(call(&c, &addr, RemotingCommand::request(RequestCode::GET_COLD_DATA_FLOW_CTR_INFO)).await.2, cold_info(""));
    broker.shutdown().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn the_commit_log_read_ahead_mode_takes_javas_two_modes_only() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());
    // A commit-log file to advise.
    assert_eq!(c.invoke(&addr, send("ReadAheadTopic", 0, "m", ""), TIMEOUT).await.unwrap().response_code(), ResponseCode::SUCCESS);
    let mode = |m: &str| raw(RequestCode::SET_COMMITLOG_READ_MODE, &[("READ_AHEAD_MODE", m)]);

    for m in ["1", "0"] {
        let expected = format!("set commitlog readahead mode success, mode: {m}");
        assert_eq!(call(&c, &addr, mode(m)).await, (ResponseCode::SUCCESS, Some(expected), String::new()));
    }
    let (code, remark, _) = call(&c, &addr, mode("2")).await;
    assert_eq!((code, remark.as_deref()), (ResponseCode::INVALID_PARAMETER, Some("set commitlog readahead mode param value error")));
    // Not a number, or no mode: Java's catch-all.
    for bad in [mode("random"), raw(RequestCode::SET_COMMITLOG_READ_MODE, &[("other", "1")])] {
        let (code, remark, _) = call(&c, &addr, bad).await;
        assert_eq!((code, remark.as_deref()), (ResponseCode::SYSTEM_ERROR, Some("set commitlog readahead mode failed")));
    }
    let (code, remark, _) = call(&c, &addr, RemotingCommand::request(RequestCode::SET_COMMITLOG_READ_MODE)).await;
    assert_eq!((code, remark.as_deref()), (ResponseCode::SYSTEM_ERROR, Some("set commitlog readahead mode param error")));
    // The broker still reads what it stored.
    assert_eq!(bodies(&pull_found(&c, &addr, "ReadAheadTopic", 0, 0).await).len(), 1);
    broker.shutdown().await;
}

fn checkpoint_master_flushed_offset(dir: &std::path::Path) -> i64 {
    let bytes = std::fs::read(dir.join("checkpoint")).unwrap();
    i64::from_be_bytes(bytes[24..32].try_into().unwrap())
}

#[tokio::test(flavor = "multi_thread")]
async fn a_slave_keeps_the_master_flush_offset_in_its_checkpoint_and_a_master_ignores_it() {
    let c = RemotingClient::new(ClientConfig::default());
    let reset = |offset: &str| raw(RequestCode::RESET_MASTER_FLUSH_OFFSET, &[("masterFlushOffset", offset)]);

    let master_dir = tempfile::tempdir().unwrap();
    let master = start(master_dir.path(), &[]).await;
    let addr = master.local_addr().to_string();
    assert_eq!(call(&c, &addr, reset("4096")).await, (ResponseCode::SUCCESS, None, String::new()));
    assert_eq!(master.broker.store.checkpoint().master_flushed_offset(), 0);
    master.shutdown().await;
    assert_eq!(checkpoint_master_flushed_offset(master_dir.path()), 0);

    let slave_dir = tempfile::tempdir().unwrap();
    let slave = start(slave_dir.path(), &[("brokerRole", "SLAVE"), ("brokerId", "1")]).await;
    let addr = slave.local_addr().to_string();
    assert_eq!(call(&c, &addr, reset("4096")).await, (ResponseCode::SUCCESS, None, String::new()));
    assert_eq!(slave.broker.store.checkpoint().master_flushed_offset(), 4096);
    // Java's 5.3.3 header decoding skips a field it cannot read: SUCCESS, nothing changed.
    let (code, remark, _) = call(&c, &addr, reset("x1")).await;
    assert_eq!(code, ResponseCode::SUCCESS);
    assert!(remark.unwrap_or_default().contains("\"x1\" is not a long"));
    let (code, remark, _) = call(&c, &addr, raw(RequestCode::RESET_MASTER_FLUSH_OFFSET, &[])).await;
    assert_eq!(code, ResponseCode::SUCCESS);
    assert!(remark.unwrap_or_default().contains("missing"));
    assert_eq!(slave.broker.store.checkpoint().master_flushed_offset(), 4096);
    slave.shutdown().await;
    // Written with the checkpoint, at Java's position (@24).
    assert_eq!(checkpoint_master_flushed_offset(slave_dir.path()), 4096);
}

#[tokio::test(flavor = "multi_thread")]
async fn rocksdb_and_controller_codes_answer_as_javas_file_store_broker() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let c = RemotingClient::new(ClientConfig::default());

    // The check runs on Java's worker; the answer is always "in progress".
    for fields in [&[("topic", "SomeTopic"), ("checkStoreTime", "0")][..], &[("topic", "")], &[]] {
        let check = raw(RequestCode::CHECK_ROCKSDB_CQ_WRITE_PROGRESS, fields);
        let expected = (ResponseCode::SUCCESS, Some("not set any response code".to_owned()), r#"{"checkStatus":2}"#.to_owned());
        assert_eq!(call(&c, &addr, check).await, expected);
    }

    let export = |types: &str| raw(RequestCode::EXPORT_ROCKSDB_CONFIG_TO_JSON, &[("configType", types)]);
    for types in ["topics;subscriptionGroups;consumerOffsets;", "TOPICS", ""] {
        assert_eq!(call(&c, &addr, export(types)).await, (ResponseCode::SUCCESS, Some("export done.".into()), String::new()), "{types}");
    }
    let (code, remark, _) = call(&c, &addr, export("topics;users")).await;
    assert_eq!((code, remark.as_deref()), (ResponseCode::SYSTEM_ERROR, Some("java.lang.IllegalArgumentException: Unknown config type: users")));
    let (code, remark, _) = call(&c, &addr, raw(RequestCode::EXPORT_ROCKSDB_CONFIG_TO_JSON, &[])).await;
    assert_eq!((code, remark.as_deref()), (ResponseCode::SYSTEM_ERROR, Some("the custom field <configType> is null")));

    let (code, remark, _) = call(&c, &addr, RemotingCommand::request(RequestCode::GET_BROKER_EPOCH_CACHE)).await;
    assert_eq!((code, remark.as_deref()), (ResponseCode::SYSTEM_ERROR, Some("this request only for controllerMode ")));
    broker.shutdown().await;
}
