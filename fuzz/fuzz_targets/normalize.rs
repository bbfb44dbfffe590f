//! Stage 1 on any argument text and tool name: a rejection or an invocation, never a panic,
//! and an accepted invocation's arguments are accepted again when sent as a parsed value.

#![no_main]

use libfuzzer_sys::fuzz_target;
use serde_json::Value;
use toolgate_core::invocation::normalize;
use toolgate_core::{NormalizeBounds, RawArguments, RawCall, Surface};

fuzz_target!(|data: &[u8]| {
    // The first byte says how much of the rest is the tool name.
    let Some((&split, rest)) = data.split_first() else {
        return;
    };
    let split = usize::from(split).min(rest.len());
    let (name, arguments) = rest.split_at(split);
    let bounds = NormalizeBounds::default();
    let raw = RawCall::text(
        String::from_utf8_lossy(name),
        String::from_utf8_lossy(arguments),
        Surface::Chat,
    );
    // Sizes are estimated differently for parsed values (a number counts five bytes), so the
    // round trip is checked only well inside the bound.
    let small = arguments.len() < bounds.max_argument_bytes / 8;
    if let (Ok(invocation), true) = (normalize(raw, &bounds), small) {
        let again = RawCall {
            arguments: RawArguments::Value(Value::Object(invocation.arguments.clone())),
            ..RawCall::text(invocation.tool.clone(), "", Surface::Chat)
        };
        let again = normalize(again, &bounds).expect("accepted arguments are accepted again");
        assert_eq!(again.arguments, invocation.arguments);
    }
});
