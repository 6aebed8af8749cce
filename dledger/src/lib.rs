//! The `dledger` crate: not built yet (see ARCHITECTURE.md). It holds nothing but its name.
