//! What an upstream MCP server writes, read the way toolgate reads it: every line is either at
//! most the cap or reported as oversized with at most 256 bytes kept at each end, and every
//! line that parses as JSON either becomes a descriptor or a reason it cannot.
#![no_main]

use std::io::BufReader;

use libfuzzer_sys::fuzz_target;
use toolgate_upstream::connection::{Line, read_line};

fuzz_target!(|data: &[u8]| {
    let max = 64;
    let mut reader = BufReader::with_capacity(16, data);
    let mut consumed = 0;
    loop {
        match read_line(&mut reader, max).expect("reading a slice cannot fail") {
            Line::End => break,
            Line::Full(line) => {
                assert!(line.len() <= max);
                consumed += line.len();
                if let Ok(value) = serde_json::from_slice::<serde_json::Value>(&line) {
                    let _ = toolgate_upstream::descriptor_of(&value);
                }
            }
            Line::Oversized { head, tail, length } => {
                assert!(length > max);
                assert!(head.len() <= 256 && tail.len() <= 256);
                consumed += length;
            }
        }
    }
    assert!(consumed <= data.len());
});
