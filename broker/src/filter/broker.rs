//! Where the broker asks for SQL92 filters: CHECK_CLIENT_CONFIG (a consumer checks its
//! subscription before it starts) and pulls. Java's codes and remarks throughout
//! (`ClientManageProcessor.checkClientConfig`, `PullMessageProcessor`).

use remoting::protocol::heartbeat::SubscriptionData;
use remoting::ResponseCode;

use std::sync::Arc;

use super::{compile_cached, is_tag_type, Expr, FilterError, SQL92};

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
    match compile_cached(&sub.sub_string) {
        Ok(_) => Ok(()),
        Err(e) => {
            tracing::warn!(expression = sub.sub_string, error = %e, "a consumer's SQL92 subscription does not compile");
            Err((ResponseCode::SUBSCRIPTION_PARSE_FAILED, e.to_string()))
        }
    }
}

/// The subscription a pull carries (FLAG_SUBSCRIPTION) when it is not a tag expression.
pub fn subscription_of_pull(topic: &str, expression_type: &str, expression: &str, sub_version: i64) -> Result<SubscriptionData, (ResponseCode, String)> {
    if expression_type == SQL92 {
        if let Err(e) = compile_cached(expression) {
            return Err((ResponseCode::SUBSCRIPTION_PARSE_FAILED, with_limit("parse the consumer's subscription failed", &e)));
        }
    }
    Ok(SubscriptionData {
        topic: topic.to_owned(),
        sub_string: expression.to_owned(),
        expression_type: expression_type.to_owned(),
        sub_version,
        ..Default::default()
    })
}

/// As [`pull_filter_shared`], a copy of the compiled filter (for callers that keep their own).
pub fn pull_filter(enable_property_filter: bool, sub: &SubscriptionData) -> Result<Option<Expr>, (ResponseCode, String)> {
    Ok(pull_filter_shared(enable_property_filter, sub)?.map(Arc::unwrap_or_clone))
}

/// The compiled filter a pull applies to each record, as kept for every pull of the same
/// expression; `None` for a tag subscription.
pub fn pull_filter_shared(enable_property_filter: bool, sub: &SubscriptionData) -> Result<Option<Arc<Expr>>, (ResponseCode, String)> {
    if is_tag_type(&sub.expression_type) {
        return Ok(None);
    }
    if !enable_property_filter {
        return Err((ResponseCode::SYSTEM_ERROR, not_supported(&sub.expression_type)));
    }
    // Java compiles at the heartbeat and, for an expression that did not compile, has no filter
    // data for the group; ours are compiled at their first use and kept (`cache`).
    const NO_FILTER_DATA: &str = "The broker's consumer filter data is not exist!Your expression may be wrong!";
    if sub.expression_type != SQL92 {
        return Err((ResponseCode::FILTER_DATA_NOT_EXIST, NO_FILTER_DATA.into()));
    }
    match compile_cached(&sub.sub_string) {
        Ok(expr) => Ok(Some(expr)),
        Err(e) => Err((ResponseCode::FILTER_DATA_NOT_EXIST, with_limit(NO_FILTER_DATA, &e))),
    }
}

/// Java's remark, and ours after it when the expression passed a bound of ours (Java has none).
fn with_limit(java_remark: &str, e: &FilterError) -> String {
    if e.over_limit {
        format!("{java_remark}: {e}")
    } else {
        java_remark.to_owned()
    }
}
