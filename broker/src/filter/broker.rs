//! Where the broker asks for SQL92 filters: CHECK_CLIENT_CONFIG (a consumer checks its
//! subscription before it starts) and pulls. Java's codes and remarks throughout
//! (`ClientManageProcessor.checkClientConfig`, `PullMessageProcessor`).

use remoting::protocol::heartbeat::SubscriptionData;
use remoting::ResponseCode;

use super::{compile, is_tag_type, Expr, SQL92};

/// Java's remark when `enablePropertyFilter` is off.
fn not_supported(expression_type: &str) -> String {
    format!("The broker does not support consumer to filter message by {expression_type}")
}

/// CHECK_CLIENT_CONFIG of one subscription: `Ok` or the code and remark to refuse it with.
pub fn check_subscription(enable_property_filter: bool, sub: &SubscriptionData) -> Result<(), (ResponseCode, String)> {
    if is_tag_type(&sub.expression_type) {
        return Ok(());
    }
    if !enable_property_filter {
        return Err((ResponseCode::SYSTEM_ERROR, not_supported(&sub.expression_type)));
    }
    if sub.expression_type != SQL92 {
        return Err((ResponseCode::SUBSCRIPTION_PARSE_FAILED, format!("no filter of type {}", sub.expression_type)));
    }
    match compile(&sub.sub_string) {
        Ok(_) => Ok(()),
        Err(e) => {
            tracing::warn!(expression = sub.sub_string, error = %e, "a consumer's SQL92 subscription does not compile");
            Err((ResponseCode::SUBSCRIPTION_PARSE_FAILED, e.to_string()))
        }
    }
}

/// The subscription a pull carries (FLAG_SUBSCRIPTION) when it is not a tag expression.
pub fn subscription_of_pull(topic: &str, expression_type: &str, expression: &str, sub_version: i64) -> Result<SubscriptionData, (ResponseCode, String)> {
    if expression_type == SQL92 && compile(expression).is_err() {
        return Err((ResponseCode::SUBSCRIPTION_PARSE_FAILED, "parse the consumer's subscription failed".into()));
    }
    Ok(SubscriptionData {
        topic: topic.to_owned(),
        sub_string: expression.to_owned(),
        expression_type: expression_type.to_owned(),
        sub_version,
        ..Default::default()
    })
}

/// The compiled filter a pull applies to each record; `None` for a tag subscription.
pub fn pull_filter(enable_property_filter: bool, sub: &SubscriptionData) -> Result<Option<Expr>, (ResponseCode, String)> {
    if is_tag_type(&sub.expression_type) {
        return Ok(None);
    }
    if !enable_property_filter {
        return Err((ResponseCode::SYSTEM_ERROR, not_supported(&sub.expression_type)));
    }
    // Java compiles at the heartbeat and, for an expression that did not compile, has no filter
    // data for the group; we compile here, as cheap as a lookup for these short expressions.
    match (sub.expression_type.as_str(), compile(&sub.sub_string)) {
        (SQL92, Ok(expr)) => Ok(Some(expr)),
        _ => Err((ResponseCode::FILTER_DATA_NOT_EXIST, "The broker's consumer filter data is not exist!Your expression may be wrong!".into())),
    }
}
