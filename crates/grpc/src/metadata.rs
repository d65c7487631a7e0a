//! Custom request metadata (`--metadata`), validated once before the run.
//!
//! # Rules
//!
//! - Each entry is either a JSON object, `{"key": "value", …}` (values must be strings), or
//!   one `key: value` pair (split at the first `:`; spaces around the value are trimmed).
//!   Entries are concatenated in order; a key may appear more than once, since gRPC
//!   metadata is multi-valued.
//! - Keys are case-insensitive and returned in lower case (HTTP/2 requires it). After
//!   lowering they may contain only `0-9 a-z _ - .`, as the gRPC protocol specifies.
//! - Reserved keys are rejected because the transport sets them, and a second copy would
//!   make the request malformed or ambiguous: pseudo-headers (`:path`, `:authority`…),
//!   `content-type`, `te`, `content-length`, `host` and the HTTP/1 connection headers
//!   (`connection`, `keep-alive`, `proxy-connection`, `transfer-encoding`, `upgrade`), and
//!   every `grpc-*` key. That includes `grpc-timeout`: the deadline comes from the run's
//!   own timeout setting, so the header the server sees and the client's own deadline
//!   cannot disagree. `user-agent` is allowed and replaces the default.
//! - Values of keys ending in `-bin` are binary metadata and must already be base64
//!   (standard alphabet, padding optional), as they are sent. Other values must be
//!   printable ASCII (`0x20..=0x7E`) without leading or trailing whitespace.

use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use base64::engine::DecodePaddingMode;
use base64::Engine;

use crate::GrpcError;

/// Reserved by HTTP/2 or set by the transport (see the module documentation).
const RESERVED: [&str; 9] = [
    "content-type",
    "te",
    "content-length",
    "host",
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "upgrade",
];

/// Base64 as gRPC accepts it in `-bin` values: standard alphabet, padded or not.
const BASE64: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Parses `--metadata` entries into `(name, value)` pairs, names in lower case.
///
/// Each entry is a JSON object of string values or a single `key: value` string; see the
/// [module documentation](self) for the rules on names and values. The first invalid entry
/// gives a [`GrpcError::Metadata`] naming it and saying why.
pub fn parse_metadata<S: AsRef<str>>(entries: &[S]) -> Result<Vec<(String, String)>, GrpcError> {
    let mut pairs = Vec::new();
    for entry in entries {
        let entry = entry.as_ref();
        let trimmed = entry.trim();
        if trimmed.starts_with('{') {
            let object: serde_json::Map<String, serde_json::Value> =
                serde_json::from_str(trimmed).map_err(|err| invalid(entry, err.to_string()))?;
            for (key, value) in object {
                let Some(value) = value.as_str() else {
                    return Err(invalid(
                        &key,
                        format!("the value must be a JSON string, found {value}"),
                    ));
                };
                pairs.push(pair(&key, value)?);
            }
        } else {
            let Some((key, value)) = trimmed.split_once(':') else {
                return Err(invalid(
                    entry,
                    "expected `key: value` or a JSON object".to_owned(),
                ));
            };
            if key.is_empty() {
                return Err(invalid(
                    entry,
                    "pseudo-headers (`:name`) are set by the transport".to_owned(),
                ));
            }
            pairs.push(pair(key.trim_end(), value.trim())?);
        }
    }
    Ok(pairs)
}

fn invalid(entry: &str, reason: String) -> GrpcError {
    GrpcError::Metadata {
        entry: entry.to_owned(),
        reason,
    }
}

/// Validates one pair; `key` is the key as given, before lowering.
fn pair(key: &str, value: &str) -> Result<(String, String), GrpcError> {
    let name = key.to_ascii_lowercase();
    if name.is_empty() {
        return Err(invalid(key, "the key is empty".to_owned()));
    }
    if name.starts_with(':') {
        return Err(invalid(
            key,
            "pseudo-headers (`:name`) are set by the transport".to_owned(),
        ));
    }
    if let Some(bad) = name
        .chars()
        .find(|c| !matches!(c, '0'..='9' | 'a'..='z' | '_' | '-' | '.'))
    {
        return Err(invalid(
            key,
            format!("keys may contain only 0-9 a-z _ - . (found {bad:?})"),
        ));
    }
    if name.starts_with("grpc-") {
        let reason = if name == "grpc-timeout" {
            "`grpc-*` keys are reserved by gRPC; the deadline comes from the run's timeout"
        } else {
            "`grpc-*` keys are reserved by gRPC"
        };
        return Err(invalid(key, reason.to_owned()));
    }
    if RESERVED.contains(&name.as_str()) {
        return Err(invalid(
            key,
            format!("`{name}` is reserved: the transport sets it"),
        ));
    }
    if name.ends_with("-bin") {
        if let Err(err) = BASE64.decode(value) {
            return Err(invalid(
                key,
                format!("a `-bin` value must be base64 ({err})"),
            ));
        }
    } else if let Some(bad) = value.chars().find(|c| !matches!(c, ' '..='~')) {
        return Err(invalid(
            key,
            format!(
                "values must be printable ASCII (found {bad:?}); use a `-bin` key for binary data"
            ),
        ));
    } else if value.starts_with(' ') || value.ends_with(' ') {
        return Err(invalid(
            key,
            "values may not start or end with whitespace".to_owned(),
        ));
    }
    Ok((name, value.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn rejected(entry: &str) -> String {
        match parse_metadata(&[entry]) {
            Err(err @ GrpcError::Metadata { .. }) => err.to_string(),
            other => panic!("{entry:?} was not rejected: {other:?}"),
        }
    }

    #[test]
    fn key_value_strings() {
        let got = parse_metadata(&[
            "authorization: Bearer abc.def",
            "X-Request-Id:42",
            "x-trace-bin: AAEC/w==",
            "x-trace-bin: AAEC/w",
            "x-empty:",
            "user-agent: loadlab/0.1",
            "x-url: http://a:80/b",
        ])
        .unwrap();
        assert_eq!(
            got,
            pairs(&[
                ("authorization", "Bearer abc.def"),
                ("x-request-id", "42"),
                ("x-trace-bin", "AAEC/w=="),
                ("x-trace-bin", "AAEC/w"),
                ("x-empty", ""),
                ("user-agent", "loadlab/0.1"),
                ("x-url", "http://a:80/b"),
            ])
        );
        assert!(parse_metadata::<&str>(&[]).unwrap().is_empty());
    }

    #[test]
    fn json_objects() {
        let got = parse_metadata(&[r#"{"Tenant": "a", "x.y_z": "b c"}"#, "k: v"]).unwrap();
        assert_eq!(got, pairs(&[("tenant", "a"), ("x.y_z", "b c"), ("k", "v")]));
        assert!(parse_metadata(&["{}"]).unwrap().is_empty());
    }

    #[test]
    fn bad_syntax() {
        assert!(rejected("no colon here").contains("expected `key: value` or a JSON object"));
        assert!(rejected(r#"{"a": "b""#).contains("invalid metadata"));
        assert!(rejected(r#"{"a": 1}"#).contains("must be a JSON string, found 1"));
        assert!(rejected(r#"{"a": ["b"]}"#).contains("must be a JSON string"));
        assert!(rejected(": v").contains("key is empty") || rejected(": v").contains("pseudo"));
    }

    #[test]
    fn bad_keys() {
        assert!(rejected("x key: v").contains("only 0-9 a-z _ - . (found ' ')"));
        assert!(rejected("x/key: v").contains("found '/'"));
        assert!(rejected("clé: v").contains("found 'é'"));
        assert!(rejected(r#"{"": "v"}"#).contains("key is empty"));
        assert!(rejected(":path: /x").contains("pseudo-headers"));
        assert!(rejected(r#"{":authority": "x"}"#).contains("pseudo-headers"));
    }

    #[test]
    fn reserved_keys() {
        for key in [
            "content-type",
            "Content-Type",
            "te",
            "host",
            "connection",
            "transfer-encoding",
            "upgrade",
            "content-length",
        ] {
            assert!(rejected(&format!("{key}: x")).contains("reserved"), "{key}");
        }
        assert!(rejected("grpc-encoding: gzip").contains("reserved by gRPC"));
        assert!(rejected("grpc-status: 0").contains("reserved by gRPC"));
        assert!(rejected("grpc-timeout: 1S").contains("deadline comes from the run's timeout"));
    }

    #[test]
    fn bad_values() {
        assert!(rejected("x-bin: not base64!").contains("must be base64"));
        assert!(rejected("x: tab\there").contains("printable ASCII (found '\\t')"));
        assert!(rejected("x: caf\u{e9}").contains("printable ASCII"));
        assert!(rejected(r#"{"x": " padded"}"#).contains("start or end with whitespace"));
        assert!(rejected(r#"{"x": "line\nbreak"}"#).contains("printable ASCII"));
    }
}
