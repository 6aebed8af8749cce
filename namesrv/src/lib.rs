//! The name server.
