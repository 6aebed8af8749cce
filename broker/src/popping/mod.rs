//! 5.x pop consumption's services, over the formats of [`crate::pop`]: [`service`] (POP_MESSAGE,
//! ACK_MESSAGE, BATCH_ACK_MESSAGE, CHANGE_MESSAGE_INVISIBLETIME), [`revive`] (unacked messages back
//! into the retry topic), [`order`] (orderly pop's state, `consumerOrderInfo.json`).

pub mod order;
pub mod revive;
pub mod service;
