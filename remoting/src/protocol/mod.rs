//! The wire types of the protocol: typed request/response headers and JSON bodies, as the Java
//! classes of the same names put them on the wire. Behaviour lives in the crates that serve them.
//!
//! Body structs declare their fields in alphabetical order because fastjson sorts keys; serde
//! then writes them in the same order Java does.

pub mod body;
pub mod broker;
pub mod heartbeat;
pub mod name;
pub mod namesrv;
pub mod register;
pub mod route;
pub mod system_topic;
pub mod topic;

#[cfg(test)]
mod call_tests;

/// Appended to remarks as Java's `FAQUrl.suggestTodo` does (clients show it).
pub const FAQ_SUFFIX: &str = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details.";

/// Topic permission bits (Java `PermName`).
pub mod perm {
    pub const PRIORITY: i32 = 8;
    pub const READ: i32 = 4;
    pub const WRITE: i32 = 2;
    pub const INHERIT: i32 = 1;
    /// Every bit set: the largest meaningful perm.
    pub const ALL: i32 = PRIORITY | READ | WRITE | INHERIT;

    pub fn is_writeable(perm: i32) -> bool {
        perm & WRITE != 0
    }

    pub fn is_readable(perm: i32) -> bool {
        perm & READ != 0
    }
}

/// Topic sys-flag bits (Java `TopicSysFlag`).
pub mod topic_sys_flag {
    pub const UNIT: i32 = 0x1;
    pub const UNIT_SUB: i32 = 0x2;

    pub fn has_unit(flag: i32) -> bool {
        flag & UNIT != 0
    }

    pub fn has_unit_sub(flag: i32) -> bool {
        flag & UNIT_SUB != 0
    }
}
