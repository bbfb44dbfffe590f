//! Canonical JSON and digests.
//!
//! Two spellings of the same JSON value — keys in another order, other whitespace, `1.0` for
//! `1` — have one canonical text and therefore one digest. Approvals, descriptor pins and audit
//! records all bind to these digests, so the canonical form must not depend on how a client
//! happened to serialize its request.

use std::fmt;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest as _, Sha256};

/// A content digest, written `sha256:<64 lowercase hex digits>`.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Digest(String);

impl Digest {
    /// Parses `sha256:<hex>`; anything else is `None`.
    pub fn parse(text: &str) -> Option<Digest> {
        let hex = text.strip_prefix("sha256:")?;
        let well_formed = hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
        well_formed.then(|| Digest(text.to_owned()))
    }

    /// The digest as text, `sha256:<hex>`.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Digest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// SHA-256 of `bytes`, as a [`Digest`].
pub fn sha256_digest(bytes: &[u8]) -> Digest {
    let hash = Sha256::digest(bytes);
    let mut text = String::with_capacity(7 + 64);
    text.push_str("sha256:");
    for byte in hash {
        for nibble in [byte >> 4, byte & 0x0f] {
            text.push(char::from_digit(u32::from(nibble), 16).unwrap_or('0'));
        }
    }
    Digest(text)
}

/// The canonical text of `value`: object keys sorted by their UTF-8 bytes, no insignificant
/// whitespace, integral floats written as integers, strings escaped as serde_json escapes them.
pub fn canonical_json(value: &Value) -> String {
    // Serializing into memory cannot fail: every key is a string.
    serde_json::to_string(&Canonical(value)).unwrap_or_default()
}

/// A JSON value that serializes as its canonical text ([`canonical_json`]), written straight
/// into the serializer's buffer, so that it can be a field of a struct serialized whole.
#[derive(Debug, Clone, Copy)]
pub struct Canonical<'a>(pub &'a Value);

impl Serialize for Canonical<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap as _, SerializeSeq as _};
        match self.0 {
            Value::Number(number) => match number.as_f64() {
                // 1.0 and 1 are the same JSON number; write the integer form. Beyond 2^53 an
                // f64 is not exact, so such values keep the text serde_json gives them.
                Some(float)
                    if !number.is_i64()
                        && !number.is_u64()
                        && float.fract() == 0.0
                        && float.abs() < 9_007_199_254_740_992.0 =>
                {
                    #[expect(
                        clippy::cast_possible_truncation,
                        reason = "the value is integral and below 2^53, so the cast is exact"
                    )]
                    let integer = float as i64;
                    serializer.serialize_i64(integer)
                }
                _ => number.serialize(serializer),
            },
            Value::Array(items) => {
                let mut seq = serializer.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Canonical(item))?;
                }
                seq.end()
            }
            Value::Object(map) => {
                let mut entries: Vec<_> = map.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
                let mut out = serializer.serialize_map(Some(entries.len()))?;
                for (key, item) in entries {
                    out.serialize_entry(key, &Canonical(item))?;
                }
                out.end()
            }
            Value::Null | Value::Bool(_) | Value::String(_) => self.0.serialize(serializer),
        }
    }
}

/// The bytes `value` takes serialized compactly, as serde_json writes it, counted without
/// writing it: output bounds are checked on every call, and large outputs are mostly strings.
pub fn json_len(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(true) => 4,
        Value::Bool(false) => 5,
        Value::Number(number) => number.to_string().len(),
        Value::String(text) => json_string_len(text),
        Value::Array(items) => {
            2 + items.len().saturating_sub(1) + items.iter().map(json_len).sum::<usize>()
        }
        Value::Object(map) => {
            2 + map.len().saturating_sub(1)
                + map
                    .iter()
                    .map(|(key, item)| json_string_len(key) + 1 + json_len(item))
                    .sum::<usize>()
        }
    }
}

/// The bytes `text` takes as a JSON string, quotes included, as serde_json escapes it.
pub fn json_string_len(text: &str) -> usize {
    // Every byte of a multi-byte UTF-8 character is 0x80 or above and is written as is, so
    // counting bytes gives the same total as counting characters. The escapes add: 1 for
    // `"`, `\\` and the control characters with short escapes (`\n`, `\r`, `\t`, `\b`, `\f`),
    // 5 for other control characters (`\u00XX`). Written without branches, in chunks small
    // enough for a `u16` count, the loop vectorises: output bounds are checked on every call.
    let mut extra = 0usize;
    for chunk in text.as_bytes().chunks(128) {
        let mut chunk_extra: u16 = 0;
        for &b in chunk {
            let control = u16::from(b < 0x20);
            let short = u16::from(b == b'\n')
                | u16::from(b == b'\r')
                | u16::from(b == b'\t')
                | u16::from(b == 0x08)
                | u16::from(b == 0x0c);
            let quote = u16::from(b == b'"') | u16::from(b == b'\\');
            chunk_extra += control * 5 - short * 4 + quote;
        }
        extra += usize::from(chunk_extra);
    }
    2 + text.len() + extra
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    #[test]
    fn key_order_and_whitespace_do_not_matter() {
        let a: Value = serde_json::from_str(r#"{"b": 1, "a": [1, {"y": 2, "x": 1}]}"#).unwrap();
        let b: Value = serde_json::from_str(r#"{"a":[1,{"x":1,"y":2}],"b":1}"#).unwrap();
        assert_eq!(canonical_json(&a), canonical_json(&b));
        assert_eq!(canonical_json(&a), r#"{"a":[1,{"x":1,"y":2}],"b":1}"#);
    }

    #[test]
    fn integral_floats_are_integers() {
        assert_eq!(canonical_json(&json!(1.0)), "1");
        assert_eq!(canonical_json(&json!(-3.0)), "-3");
        assert_eq!(canonical_json(&json!(1.5)), "1.5");
    }

    /// Digests bound before (approvals, descriptor pins) must still match: the text is fixed.
    #[test]
    fn the_canonical_text_is_fixed_to_the_byte() {
        let value: Value = serde_json::from_str(
            r#"{"z": [1.0, -0.0, 2.5e-3, 1e300, 18446744073709551615, -9007199254740993],
                "é": "tab\t nl\n quote\" back\\ bell\u0007 \u2028 😀",
                "Z": {"b": null, "a": true, "": false}, "a b": [], "aa": {}}"#,
        )
        .unwrap();
        assert_eq!(
            canonical_json(&value),
            "{\"Z\":{\"\":false,\"a\":true,\"b\":null},\"a b\":[],\"aa\":{},\
             \"z\":[1,0,0.0025,1e+300,18446744073709551615,-9007199254740993],\
             \"é\":\"tab\\t nl\\n quote\\\" back\\\\ bell\\u0007 \u{2028} 😀\"}"
        );
    }

    #[test]
    fn json_len_matches_serde_json() {
        let values = [
            json!(null),
            json!(true),
            json!(false),
            json!(-12.5),
            json!(18446744073709551615u64),
            json!(""),
            json!("quote\"back\\slash tab\tnl\n\u{1}\u{1f}\u{7f} 日本 \u{8}\u{c}\r"),
            json!([]),
            json!([1, "a", [null]]),
            json!({}),
            json!({"a\"": {"b": [1, 2, {"c": "d"}]}, "e": false}),
        ];
        for value in values {
            assert_eq!(
                json_len(&value),
                serde_json::to_string(&value).unwrap().len(),
                "{value}"
            );
        }
    }

    #[test]
    fn digests_parse_only_their_own_form() {
        let digest = sha256_digest(b"abc");
        assert_eq!(
            digest.as_str(),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(Digest::parse(digest.as_str()), Some(digest.clone()));
        assert_eq!(Digest::parse("sha256:BA78"), None);
        assert_eq!(Digest::parse(&digest.as_str().to_uppercase()), None);
        assert_eq!(Digest::parse("md5:ba7816bf"), None);
    }

    fn arb_json() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(|n| json!(n)),
            "[a-z\\u{e9}\"\\\\]{0,6}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 32, 6, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..5).prop_map(Value::Array),
                prop::collection::btree_map("[a-e]{1,3}", inner, 0..5)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Reverses the key order of every object and pretty-prints, as a differently-minded
    /// client would.
    fn respell(value: &Value) -> String {
        fn reorder(value: &Value) -> String {
            match value {
                Value::Object(map) => {
                    let parts: Vec<String> = map
                        .iter()
                        .rev()
                        .map(|(k, v)| format!("\n  {} :  {}", json!(k), reorder(v)))
                        .collect();
                    format!("{{ {} }}", parts.join(" ,"))
                }
                Value::Array(items) => {
                    let parts: Vec<String> = items.iter().map(reorder).collect();
                    format!("[ {} ]", parts.join(" , "))
                }
                other => other.to_string(),
            }
        }
        reorder(value)
    }

    proptest! {
        #[test]
        fn respelling_keeps_the_digest(value in arb_json()) {
            let respelled: Value = serde_json::from_str(&respell(&value)).unwrap();
            prop_assert_eq!(
                sha256_digest(canonical_json(&value).as_bytes()),
                sha256_digest(canonical_json(&respelled).as_bytes())
            );
        }

        #[test]
        fn json_string_len_matches_serde_json(text in "(?s).{0,200}") {
            prop_assert_eq!(json_string_len(&text), serde_json::to_string(&text).unwrap().len());
        }

        #[test]
        fn any_value_change_changes_the_digest(value in arb_json(), other in arb_json()) {
            prop_assume!(value != other);
            prop_assert_ne!(
                sha256_digest(canonical_json(&value).as_bytes()),
                sha256_digest(canonical_json(&other).as_bytes())
            );
        }
    }
}
