//! The `store` crate: not built yet (see ARCHITECTURE.md). It holds nothing but its name.
