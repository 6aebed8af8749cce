// Package compat holds wire-compatibility tests that drive the official Go client
// (github.com/apache/rocketmq-client-go/v2) through the rocketmq-rs name server.
//
// Every test starts real processes (a name server and a Java broker) on 127.0.0.1
// with free ports and temporary directories, and stops them again. See README.md.
package compat
