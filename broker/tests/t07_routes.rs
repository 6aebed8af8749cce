//! The route table through the socket: every routed code reaches its processor (none answers
//! REQUEST_CODE_NOT_SUPPORTED, whatever its header), codes not in the table are answered
//! REQUEST_CODE_NOT_SUPPORTED, and with `aclEnable=true` every admin-only route refuses an
//! account that is not an admin.

mod common;

use broker::routes::{Access, ROUTES};
use common::*;
use remoting::client::RemotingClient;
use remoting::command::ExtFields;
use remoting::{RemotingCommand, RequestCode, ResponseCode};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_routed_code_reaches_its_processor_and_no_other_code_does() {
    let dir = tempfile::tempdir().unwrap();
    let broker = start(dir.path(), &[]).await;
    let addr = broker.local_addr().to_string();
    let client = RemotingClient::new(Default::default());
    for route in ROUTES {
        // No header at all: each processor answers with its own error (or an answer), never
        // with "not supported".
        let response = client.invoke(&addr, RemotingCommand::request(route.code), TIMEOUT).await.unwrap();
        assert_ne!(
            response.code,
            ResponseCode::REQUEST_CODE_NOT_SUPPORTED.0,
            "{} ({}) is routed but its processor does not serve it",
            route.name(),
            route.code.0
        );
    }
    // 5.3.3's AUTH_CREATE_USER (3001: ACL 2.0, not built) and a code nobody has.
    for code in [RequestCode(3_001), RequestCode(99_999)] {
        let response = client.invoke(&addr, RemotingCommand::request(code), TIMEOUT).await.unwrap();
        assert_eq!(response.code, ResponseCode::REQUEST_CODE_NOT_SUPPORTED.0, "{code:?}");
    }
    broker.shutdown().await;
}

const PLAIN_ACL: &str =
    "accounts:\n  - accessKey: NormalUser\n    secretKey: 12345678\n    admin: false\n    defaultTopicPerm: PUB|SUB\n    defaultGroupPerm: PUB|SUB\n";

fn signed(code: RequestCode) -> RemotingCommand {
    let mut ext = ExtFields::default();
    ext.insert(broker::acl::ACCESS_KEY.into(), "NormalUser".into());
    let mut request = RemotingCommand { ext_fields: Some(ext), ..RemotingCommand::request(code) };
    let signature = broker::acl::sign(&request, "12345678");
    request.ext_fields.as_mut().unwrap().insert(broker::acl::SIGNATURE.into(), signature);
    request
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_admin_route_refuses_an_account_that_is_not_an_admin() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir_all(home.join("conf")).unwrap();
    std::fs::write(home.join("conf/plain_acl.yml"), PLAIN_ACL).unwrap();
    let store = dir.path().join("store");
    let broker = start(&store, &[("aclEnable", "true"), ("rocketmqHome", home.to_str().unwrap())]).await;
    let addr = broker.local_addr().to_string();
    let client = RemotingClient::new(Default::default());
    let mut admin_routes = 0;
    for route in ROUTES.iter().filter(|r| matches!(r.access, Access::Admin)) {
        admin_routes += 1;
        let response = client.invoke(&addr, signed(route.code), TIMEOUT).await.unwrap();
        let expected =
            format!("org.apache.rocketmq.acl.common.AclException: Need admin permission for request code={}, but accessKey=NormalUser is not", route.code.0);
        assert_eq!((response.code, response.remark.as_deref()), (ResponseCode::SYSTEM_ERROR.0, Some(expected.as_str())), "{}", route.name());
    }
    assert!(admin_routes >= 19, "{admin_routes}");
    // The same account passes the check of a route that only needs a signature.
    let response = client.invoke(&addr, signed(RequestCode::GET_BROKER_RUNTIME_INFO), TIMEOUT).await.unwrap();
    assert_eq!(response.code, ResponseCode::SUCCESS.0);
    broker.shutdown().await;
}
