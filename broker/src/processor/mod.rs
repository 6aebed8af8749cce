//! Request processors, one file per family of codes, as Java's.

pub mod acl_admin;
pub mod admin;
pub mod batch_create;
pub mod broker_stats;
pub mod client_manage;
pub mod cold_data;
pub mod consume_queue_query;
pub mod consumer_manage;
pub mod end_transaction;
pub mod lock;
pub mod maintenance;
pub mod pop;
pub mod pull;
pub mod query;
pub mod query_assignment;
pub mod relay;
pub mod reply;
pub mod send;
pub mod store_admin;
pub mod timer;

use remoting::RemotingCommand;
use remoting::ResponseCode;

pub(crate) fn ok(request: &RemotingCommand) -> RemotingCommand {
    RemotingCommand::response_to(request, ResponseCode::SUCCESS)
}
