#![no_main]
//! The core's matchers over arbitrary bytes (engine::fuzz_one).

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| _core::engine::fuzz_one(data));
