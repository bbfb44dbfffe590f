//! Any bytes a client sends as one message: decoded into a message for rmcp, an error reply or
//! nothing, never a panic. A message that comes out is well formed enough to serialize again.

#![no_main]

use libfuzzer_sys::fuzz_target;
use toolgate_mcp::wire::{Decoded, decode};

fuzz_target!(|data: &[u8]| {
    match decode(data) {
        Decoded::Message(message) => {
            let _ = serde_json::to_vec(&message);
        }
        Decoded::Reply(reply) => {
            // A reply is always sendable.
            assert!(serde_json::to_vec(&reply).is_ok());
        }
        Decoded::Ignore => {}
    }
});
