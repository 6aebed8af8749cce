//! 5.x pop consumption's services, over the formats of [`crate::pop`]: [`service`] (POP_MESSAGE,
//! ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME), [`peek`] (PEEK_MESSAGE),
//! [`notification`] (NOTIFICATION, POLLING_INFO), [`revive`] (unacked messages back into the retry
//! topic), [`order`] (orderly pop's state, `consumerOrderInfo.json`), [`merge`] (the buffer merge
//! of `enablePopBufferMerge`: check points held until acked or due).

pub mod merge;
pub mod notification;
pub mod order;
pub mod peek;
pub mod revive;
pub mod service;
