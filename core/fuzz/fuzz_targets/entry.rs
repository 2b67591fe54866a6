#![no_main]
//! Every function of the core that reads raw bytes, over arbitrary bytes (fuzz::fuzz_one).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| _core::fuzz::fuzz_one(data));
