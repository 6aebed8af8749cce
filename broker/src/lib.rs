//! The RocketMQ broker, compatible with Java's: a Java broker can be stopped and this one started
//! on the same `broker.conf` and store directory, and back.
//!
//! Layers, from the configuration up:
//! - [`config`]: `BrokerConfig` (Java's broker, Netty server and client keys) and loading
//!   `broker.conf` into it and the store's `MessageStoreConfig`;
//! - [`config_file`]: Java's `ConfigManager` discipline for `config/*.json` (backup, tmp, which
//!   file wins at load);
//! - metadata, each persisted in fastjson's pretty format: [`topic_config`] (`topics.json`),
//!   [`subscription_group`] (`subscriptionGroup.json`), [`consumer_offset`]
//!   (`consumerOffset.json`), [`delay_offset`] (`delayOffset.json`);
//! - the message store itself is the `store` crate;
//! - who is connected: [`client`] (consumer and producer groups by connection);
//! - [`replication`] (master/slave HA) and [`dledger`] (the commit log on a DLedger group, roles
//!   following the group's leader);
//! - [`filter`]: SQL92 property filters (Java's selector grammar and evaluation);
//! - [`long_polling`] (parked pulls) and [`namesrv_client`] (registration with name servers);
//! - [`pop`]: 5.x pop consumption's data formats (check points, acks, receipt handles, names).

pub mod acl;
pub mod broker;
pub mod client;
pub mod config;
pub mod config_file;
pub mod consumer_offset;
pub mod consumption;
pub mod controller;
pub mod delay_offset;
pub mod dledger;
pub mod fast_failure;
pub mod filter;
pub mod handles;
pub mod load_balance;
pub mod long_polling;
pub mod metadata;
pub mod metrics;
pub mod namesrv_client;
pub mod parking;
pub mod persister;
pub mod pop;
pub mod popping;
pub mod processor;
pub mod proxy_local;
pub mod put;
pub mod rebalance_lock;
pub mod replication;
pub mod routes;
pub mod runtime_config;
pub mod schedule;
pub mod slave_sync;
pub mod stats;
pub mod stats_manager;
pub mod subscription_group;
#[cfg(test)]
pub(crate) mod testing;
pub mod timer;
pub mod topic_attributes;
pub mod topic_config;
pub mod transaction;
#[cfg(test)]
mod transaction_tests;
