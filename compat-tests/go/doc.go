// Package compat holds wire-compatibility tests that drive the official Go client
// (github.com/apache/rocketmq-client-go/v2) through the rocketmq-rs name server, with
// Java brokers and with the rocketmq-rs broker.
//
// Every test starts real processes (a name server and a broker) on 127.0.0.1
// with free ports and temporary directories, and stops them again. See README.md.
package compat
