//! [`GrpcCall`]: a resolved unary call as a transport sends it, and as a workload carries
//! it over the wire (serializable; no descriptors).

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::message::MessageTemplate;

/// A unary call ready to send: the `:path`, the request frame sent for every call (or the
/// template of the request message, when its JSON holds `${...}` templates), and the
/// custom metadata. Built once by [`GrpcCall::resolve`] from the proto, the method, the
/// JSON data and the metadata entries, by `loadlab grpc` and by plan scenarios alike.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GrpcCall {
    /// `/package.Service/Method`.
    pub path: String,
    /// The request message in its gRPC frame (base64 in JSON). With a [`GrpcCall::template`],
    /// the message with every template at its field's zero value (an empty string, 0,
    /// `false`; so a proto3 field holding only a template is left out): a valid request,
    /// but not the one to send.
    #[serde(with = "base64_bytes")]
    pub frame: Bytes,
    /// The request message's template, when the JSON holds `${...}` templates: compile it
    /// with [`crate::CompiledMessage::compile`] and render each call's frame with
    /// [`crate::CompiledMessage::render_frame`] instead of sending [`GrpcCall::frame`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template: Option<MessageTemplate>,
    /// Custom metadata `(key, value)`, keys in lower case, already validated.
    pub metadata: Vec<(String, String)>,
    /// A server-streaming method: the server answers with a stream of messages, each one a
    /// reply. Absent (false) in what older agents read and write.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub server_streaming: bool,
    /// A bidirectional method: the request message goes again and again on a stream held
    /// open, each message the server sends the reply to the oldest one unanswered. Absent
    /// (false) in what older agents read and write.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bidirectional: bool,
    /// A client-streaming method: the request message goes
    /// [`GrpcCall::messages_per_call`] times on a stream, then the request side ends and
    /// the server's one reply answers the call. Absent (false) in what older agents read
    /// and write.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub client_streaming: bool,
    /// A client-streaming call's messages (0 when the method is not client-streaming).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub messages_per_call: u32,
    /// A server-streaming call's `--sent-at`: the number field of each message that says
    /// when the server sent it. Absent in what older agents read and write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sent_at: Option<crate::fields::FieldPath>,
    /// A bidirectional call's `--match-field`: the number field each reply echoes from the
    /// message it answers. Absent in what older agents read and write.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub match_field: Option<Box<MatchField>>,
    /// A server-streaming call's `--stream-lifetime`, ms: streams are opened at the run's
    /// rate, each held this long after its first message and then reset, rather than held
    /// at a count (0). Absent in what older agents read and write.
    #[serde(default, skip_serializing_if = "is_zero_ms")]
    pub lifetime_ms: u64,
}

/// The number field a bidirectional method's replies echo from their request: a reply
/// answers the message waiting on its stream whose request held the same number.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MatchField {
    /// Where it is in the request message.
    pub request: crate::fields::FieldPath,
    /// Where it is in the reply message.
    pub reply: crate::fields::FieldPath,
}

/// What a streaming call's replies are read for, by field path (each `None`: not read).
#[derive(Clone, Copy, Debug, Default)]
pub struct Reads<'a> {
    /// `--sent-at`: when the server sent each message (server-streaming and bidirectional).
    pub sent_at: Option<&'a str>,
    /// `--match-field`: the field a bidirectional method's replies echo from their request.
    pub match_field: Option<&'a str>,
}

/// Messages a client-streaming call sends before it ends its side, unless told otherwise.
pub const DEFAULT_MESSAGES_PER_CALL: u32 = 10;

// serde's `skip_serializing_if` passes a reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero(n: &u32) -> bool {
    *n == 0
}

// serde's `skip_serializing_if` passes a reference.
#[allow(clippy::trivially_copy_pass_by_ref)]
fn is_zero_ms(n: &u64) -> bool {
    *n == 0
}

/// Which input of [`GrpcCall::resolve`] a [`crate::GrpcError`] is about.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallInput {
    /// The proto, the method or the JSON data.
    Call,
    /// A metadata entry.
    Metadata,
    /// The `--sent-at` field path.
    SentAt,
    /// The `--match-field` field path.
    MatchField,
}

#[cfg(feature = "resolve")]
impl GrpcCall {
    /// Compiles `proto` (imports searched in `include_dirs`, then the proto's directory),
    /// finds the method `call` (of any kind), encodes `data` (proto3 JSON) and validates
    /// `metadata` (`key: value` entries or JSON objects). The error says which input was
    /// at fault, so the caller can name its flag or plan field.
    ///
    /// When `data` holds `${...}` templates ([`loadlab_template::Template::has_expressions`]
    /// on its text), [`GrpcCall::template`] is the message's template (see
    /// [`crate::UnaryCall::resolve`]); its templates are parsed and checked against the
    /// data file by [`crate::CompiledMessage::compile`].
    pub fn resolve<S: AsRef<str>>(
        proto: &std::path::Path,
        include_dirs: &[std::path::PathBuf],
        call: &str,
        data: &str,
        metadata: &[S],
    ) -> Result<GrpcCall, (CallInput, crate::GrpcError)> {
        let schema = crate::Schema::Proto {
            file: proto,
            include_dirs,
        };
        GrpcCall::resolve_from(schema, call, data, metadata, Reads::default())
    }

    /// [`GrpcCall::resolve`] with the service described by `schema` (a `.proto` file, or a
    /// descriptor set: a `--protoset` file, what the server's reflection sent), and the
    /// field paths its replies are read for (`reads`: a server-streaming or bidirectional
    /// method's `sent_at`, a bidirectional one's `match_field`;
    /// [`crate::UnaryCall::field_path`]).
    pub fn resolve_from<S: AsRef<str>>(
        schema: crate::Schema<'_>,
        call: &str,
        data: &str,
        metadata: &[S],
        reads: Reads<'_>,
    ) -> Result<GrpcCall, (CallInput, crate::GrpcError)> {
        let resolved =
            crate::UnaryCall::resolve_from(schema, call, data).map_err(|e| (CallInput::Call, e))?;
        let match_field = match reads.match_field {
            None => None,
            Some(p) if !resolved.bidirectional() => {
                return Err((
                    CallInput::MatchField,
                    crate::GrpcError::FieldPath {
                        pointer: p.to_owned(),
                        message_type: resolved.response_type().to_owned(),
                        message: format!(
                            "only a bidirectional method's replies are matched to their messages by a field (`{call}` is not one; its replies are matched by order)"
                        ),
                    },
                ))
            }
            Some(p) => Some(Box::new(MatchField {
                request: resolved
                    .request_field_path(p)
                    .map_err(|e| (CallInput::MatchField, e))?,
                reply: resolved
                    .field_path(p)
                    .map_err(|e| (CallInput::MatchField, e))?,
            })),
        };
        let sent_at = match reads.sent_at {
            None => None,
            Some(p) if !resolved.server_streaming() => {
                return Err((
                    CallInput::SentAt,
                    crate::GrpcError::FieldPath {
                        pointer: p.to_owned(),
                        message_type: resolved.response_type().to_owned(),
                        message: format!(
                            "only the messages of a server-streaming or bidirectional method are read for when the server sent them (`{call}` is neither)"
                        ),
                    },
                ))
            }
            Some(p) => Some(resolved.field_path(p).map_err(|e| (CallInput::SentAt, e))?),
        };
        let metadata = crate::parse_metadata(metadata).map_err(|e| (CallInput::Metadata, e))?;
        Ok(GrpcCall {
            path: resolved.path().to_string(),
            frame: resolved.request_frame(),
            template: resolved.message_template().cloned(),
            metadata,
            server_streaming: resolved.server_streaming(),
            bidirectional: resolved.bidirectional(),
            client_streaming: resolved.client_streaming(),
            messages_per_call: if resolved.client_streaming() {
                DEFAULT_MESSAGES_PER_CALL
            } else {
                0
            },
            sent_at,
            match_field,
            lifetime_ms: 0,
        })
    }
}

/// Serde for [`Bytes`] as a base64 string (standard alphabet, padded).
pub(crate) mod base64_bytes {
    use base64::Engine as _;
    use bytes::Bytes;
    use serde::{Deserialize, Deserializer, Serializer};

    pub(crate) fn serialize<S: Serializer>(b: &Bytes, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&base64::engine::general_purpose::STANDARD.encode(b))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Bytes, D::Error> {
        let text = String::deserialize(d)?;
        base64::engine::general_purpose::STANDARD
            .decode(text)
            .map(Bytes::from)
            .map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_through_json_with_the_frame_in_base64() {
        let call = GrpcCall {
            path: "/helloworld.Greeter/SayHello".into(),
            frame: Bytes::from_static(&[0, 0, 0, 0, 2, 10, 0]),
            metadata: vec![("x-a".into(), "1".into())],
            template: None,
            server_streaming: false,
            bidirectional: false,
            client_streaming: false,
            messages_per_call: 0,
            sent_at: None,
            match_field: None,
            lifetime_ms: 0,
        };
        let json = serde_json::to_value(&call).unwrap();
        assert_eq!(json["frame"], "AAAAAAIKAA==");
        // No template: no key (what older agents read).
        assert!(json.get("template").is_none(), "{json}");
        assert!(json.get("server_streaming").is_none(), "{json}");
        assert!(json.get("bidirectional").is_none(), "{json}");
        assert!(json.get("client_streaming").is_none(), "{json}");
        assert!(json.get("messages_per_call").is_none(), "{json}");
        assert_eq!(serde_json::from_value::<GrpcCall>(json).unwrap(), call);
    }
}
