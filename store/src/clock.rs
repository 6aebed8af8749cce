//! The wall clock the store stamps records with: the one clock of the project.

pub use remoting::clock::now_ms;
