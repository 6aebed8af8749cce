//! Java's broker fast failure through the broker's socket: a send that waited in the send pool's
//! queue past `waitTimeMillsInSendQueue` is answered SYSTEM_BUSY with Java's remark instead of
//! being run late; with `brokerFastFailureEnable=false` (a live key) it waits and is run.

mod common;

use std::sync::{mpsc, Arc};
use std::time::Duration;

use broker::routes::Pool;
use common::*;
use remoting::client::{ClientConfig, RemotingClient};
use remoting::pool::BusinessPool;
use remoting::{RemotingCommand, RequestCode, ResponseCode};

/// Holds the pool's only worker until the returned sender is dropped or sent to.
fn hold_the_worker(pool: &BusinessPool) -> mpsc::Sender<()> {
    let (release, held) = mpsc::channel::<()>();
    pool.try_execute(0, move || {
        let _ = held.recv();
    })
    .unwrap();
    while pool.queued() > 0 {
        std::thread::yield_now();
    }
    release
}

#[tokio::test(flavor = "multi_thread")]
async fn a_send_that_waited_too_long_in_its_queue_is_refused_unless_fast_failure_is_off() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[("brokerFastFailureEnable", "true"), ("sendMessageThreadPoolNums", "1"), ("waitTimeMillsInSendQueue", "20")]).await;
    let addr = broker.local_addr().to_string();
    let c = Arc::new(RemotingClient::new(ClientConfig::default()));
    let r = c.invoke(&addr, send("Busy", 0, "first", ""), TIMEOUT).await.unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS);
    let pool = broker.pool(Pool::Send).unwrap();

    // The worker is held: the send waits in the queue until the clean answers it.
    let release = hold_the_worker(&pool);
    let r = c.invoke(&addr, send("Busy", 0, "late", ""), TIMEOUT).await.unwrap();
    drop(release);
    assert_eq!(r.response_code(), ResponseCode::SYSTEM_BUSY);
    let remark = r.remark.clone().unwrap_or_default();
    let waited = remark
        .strip_prefix("[TIMEOUT_CLEAN_QUEUE]broker busy, start flow control for a while, period in queue: ")
        .and_then(|rest| rest.strip_suffix("ms, size of queue: 0"))
        .unwrap_or_else(|| panic!("not Java's remark: {remark}"));
    assert!(waited.parse::<u64>().unwrap() >= 20, "{remark}");

    // Off (at once, a live key): the send waits past the limit and is run once the worker is free.
    let off = RemotingCommand::request(RequestCode::UPDATE_BROKER_CONFIG).with_body("brokerFastFailureEnable=false\n".to_owned());
    assert_eq!(c.invoke(&addr, off, TIMEOUT).await.unwrap().response_code(), ResponseCode::SUCCESS);
    let release = hold_the_worker(&pool);
    let late = {
        let (c, addr) = (c.clone(), addr.clone());
        tokio::spawn(async move { c.invoke(&addr, send("Busy", 0, "run late", ""), TIMEOUT).await })
    };
    while pool.queued() == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // Many rounds of the clean (every 10 ms) pass while it waits.
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(pool.queued(), 1, "still queued, not refused");
    release.send(()).unwrap();
    let r = late.await.unwrap().unwrap();
    assert_eq!(r.response_code(), ResponseCode::SUCCESS, "{:?}", r.remark);
    broker.shutdown().await;
}
