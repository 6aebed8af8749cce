//! Arbitrary bytes as the ext fields of every typed header the broker decodes (checked against a
//! model of Java's decoding, round-tripped), as message properties and `Properties` text, and as
//! every JSON body and config file the broker reads. See `broker_fuzz` (src/lib.rs).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    broker_fuzz::check_all(data);
});
