#![no_main]
libfuzzer_sys::fuzz_target!(|data: &[u8]| xenstore_fuzz::event_loop(data));
