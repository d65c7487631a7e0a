//! A gRPC method of any kind (unary, server-streaming, client-streaming or bidirectional)
//! resolved from a `.proto` file at run time.

use std::path::{Path, PathBuf};

use bytes::Bytes;
use prost::Message;
use prost_reflect::{DescriptorPool, DynamicMessage, MessageDescriptor};

use crate::message::MessageTemplate;
use crate::{frame, json, templated, GrpcError};

/// Where a call's service is described.
#[derive(Clone, Copy, Debug)]
pub enum Schema<'a> {
    /// A `.proto` file, compiled at run time, with the directories searched for its
    /// imports (then its own directory).
    Proto {
        /// The file.
        file: &'a Path,
        /// The directories searched for its imports.
        include_dirs: &'a [PathBuf],
    },
    /// A compiled descriptor set (`google.protobuf.FileDescriptorSet`, as `protoc
    /// --include_imports --descriptor_set_out` writes it and as [`crate::reflection`]
    /// collects it from a server), with every file it imports.
    Set {
        /// The set's encoding.
        bytes: &'a [u8],
        /// Where it came from, for errors: a file's path, or the server.
        from: &'a str,
    },
}

impl Schema<'_> {
    /// The descriptors.
    fn pool(&self) -> Result<DescriptorPool, GrpcError> {
        match *self {
            Schema::Proto { file, include_dirs } => compile(file, include_dirs),
            Schema::Set { bytes, from } => {
                DescriptorPool::decode(bytes).map_err(|e| GrpcError::Descriptors {
                    source_name: from.to_owned(),
                    message: format!("not a consistent descriptor set: {e}"),
                })
            }
        }
    }

    /// Where the descriptors came from, for errors.
    fn name(&self) -> String {
        match *self {
            Schema::Proto { file, .. } => file.display().to_string(),
            Schema::Set { from, .. } => from.to_owned(),
        }
    }
}

/// A unary method resolved from a `.proto` file at run time, with its request encoded once
/// (and its template, when the request JSON holds `${...}` templates).
///
/// Cheap to clone (descriptors are reference-counted and the frame is [`Bytes`]).
#[derive(Debug, Clone)]
pub struct UnaryCall {
    /// `/package.Service/Method`.
    path: String,
    /// The request message type.
    input: MessageDescriptor,
    /// The response message type.
    output: MessageDescriptor,
    /// The request message in a gRPC frame, shared by every request.
    request_frame: Bytes,
    /// The request message's template, when its JSON holds templates.
    template: Option<MessageTemplate>,
    /// The server answers with a stream of messages (`returns (stream …)`).
    server_streaming: bool,
    /// Both sides stream (`rpc M(stream A) returns (stream B)`): the request message is
    /// sent again and again on one stream, each reply matched to a message.
    bidirectional: bool,
    /// The client streams and the server answers once (`rpc M(stream A) returns (B)`):
    /// the request message is sent several times on a stream, which the reply ends.
    client_streaming: bool,
}

impl UnaryCall {
    /// Compiles `proto` (with `include_dirs` for imports) using `protox` (pure Rust, no
    /// `protoc`), finds `call` = `"package.Service/Method"` (also accepted:
    /// `"package.Service.Method"` and a leading `/`), notes its kind (unary,
    /// server-streaming, client-streaming or bidirectional), and parses `data`
    /// (JSON, in the proto3 JSON mapping) into the request message type.
    ///
    /// The directory of `proto` is searched for imports after `include_dirs` (as ghz does).
    ///
    /// Errors name what is wrong: the proto file and line of a syntax error, an unknown
    /// service (listing the services found), an unknown method (listing the service's
    /// methods), JSON that does not fit the message (the field and the expected type).
    ///
    /// When `data` holds `${...}` templates ([`loadlab_template::Template::has_expressions`]
    /// on its text), every JSON string is template text: the request message's template is
    /// built ([`UnaryCall::message_template`]; templates in map fields, `bytes` fields and
    /// well-known types other than the scalar wrappers are refused, naming the field), and
    /// [`UnaryCall::request_frame`] holds the message with each template at its field's
    /// zero value. The JSON is checked with each template replaced by that zero value, so
    /// every other mistake is reported as without templates. The template texts are
    /// parsed and checked later, with the data file, by
    /// [`crate::CompiledMessage::compile`].
    pub fn resolve(
        proto: &Path,
        include_dirs: &[PathBuf],
        call: &str,
        data: &str,
    ) -> Result<UnaryCall, GrpcError> {
        UnaryCall::resolve_from(
            Schema::Proto {
                file: proto,
                include_dirs,
            },
            call,
            data,
        )
    }

    /// [`UnaryCall::resolve`] with the service described by `schema`: a `.proto` file, or a
    /// compiled descriptor set (a `--protoset` file, what the server's reflection sent).
    pub fn resolve_from(
        schema: Schema<'_>,
        call: &str,
        data: &str,
    ) -> Result<UnaryCall, GrpcError> {
        // Parse the call first: it costs nothing and needs no file.
        let (service_name, method_name) = split_call(call)?;
        let pool = schema.pool()?;

        let Some(service) = pool.get_service_by_name(service_name) else {
            let mut available: Vec<String> =
                pool.services().map(|s| s.full_name().to_owned()).collect();
            available.sort();
            return Err(GrpcError::UnknownService {
                service: service_name.to_owned(),
                source_name: schema.name(),
                available,
            });
        };
        let Some(method) = service.methods().find(|m| m.name() == method_name) else {
            return Err(GrpcError::UnknownMethod {
                service: service_name.to_owned(),
                method: method_name.to_owned(),
                available: service.methods().map(|m| m.name().to_owned()).collect(),
            });
        };
        let path = format!("/{}/{}", service.full_name(), method.name());
        let (request, template) = if loadlab_template::Template::has_expressions(data) {
            templated::resolve(&method.input(), data)?
        } else {
            (request_message(&method.input(), data)?, None)
        };
        let request_frame = frame::encode(&request.encode_to_vec());
        Ok(UnaryCall {
            path,
            input: method.input(),
            output: method.output(),
            request_frame,
            template,
            server_streaming: method.is_server_streaming(),
            bidirectional: method.is_client_streaming() && method.is_server_streaming(),
            client_streaming: method.is_client_streaming() && !method.is_server_streaming(),
        })
    }

    /// Whether the server answers with a stream of messages (a server-streaming method):
    /// each message is a reply, and the call ends with the stream.
    pub fn server_streaming(&self) -> bool {
        self.server_streaming
    }

    /// Whether both sides stream (a bidirectional method): messages go on a stream held
    /// open, and each message the server sends answers one of them, in order.
    pub fn bidirectional(&self) -> bool {
        self.bidirectional
    }

    /// Whether the client streams and the server answers once (a client-streaming
    /// method): the request message goes several times on a stream, then the request side
    /// ends and the server's one reply answers the call.
    pub fn client_streaming(&self) -> bool {
        self.client_streaming
    }

    /// The HTTP/2 `:path`, e.g. `"/helloworld.Greeter/SayHello"`.
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The fully qualified request message type, e.g. `"helloworld.HelloRequest"`.
    pub fn request_type(&self) -> &str {
        self.input.full_name()
    }

    /// The fully qualified response message type, e.g. `"helloworld.HelloReply"`.
    pub fn response_type(&self) -> &str {
        self.output.full_name()
    }

    /// The request message encoded once, inside a gRPC frame (1-byte compressed flag 0,
    /// 4-byte big-endian length, message bytes), ready to send for every request.
    ///
    /// A clone of a reference-counted buffer: no copy, no allocation.
    pub fn request_frame(&self) -> Bytes {
        self.request_frame.clone()
    }

    /// The request message's template, when the request JSON holds `${...}` templates:
    /// compile it with [`crate::CompiledMessage::compile`] to render each request.
    pub fn message_template(&self) -> Option<&MessageTemplate> {
        self.template.as_ref()
    }

    /// The number field of the reply message at `pointer` (`/sent_at_us`, `/meta/ts`: field
    /// names, proto or JSON, from the top), for `--sent-at`: an integer, a floating-point
    /// number or a `google.protobuf.Timestamp`, inside singular message fields. Errors name
    /// the segment at fault and the fields there are.
    pub fn field_path(&self, pointer: &str) -> Result<crate::fields::FieldPath, GrpcError> {
        field_path_in(&self.output, pointer)
    }

    /// [`UnaryCall::field_path`] in the request message: the field a bidirectional
    /// method's replies echo (`--match-field`).
    pub fn request_field_path(&self, pointer: &str) -> Result<crate::fields::FieldPath, GrpcError> {
        field_path_in(&self.input, pointer)
    }
}

/// The number field at `pointer` in `top` ([`UnaryCall::field_path`]).
fn field_path_in(
    top: &prost_reflect::MessageDescriptor,
    pointer: &str,
) -> Result<crate::fields::FieldPath, GrpcError> {
    use crate::fields::{FieldPath, NumberKind};
    use prost_reflect::{Cardinality, Kind};
    let err = |message: String| GrpcError::FieldPath {
        pointer: pointer.to_owned(),
        message_type: top.full_name().to_owned(),
        message,
    };
    let segments: Vec<&str> = pointer.trim_start_matches('/').split('/').collect();
    if segments.iter().any(|s| s.is_empty()) {
        return Err(err(
            "give field names from the top, as `/sent_at_us` or `/meta/ts`".into(),
        ));
    }
    let mut message = top.clone();
    let mut numbers = Vec::new();
    for (k, name) in segments.iter().enumerate() {
        let Some(field) = message
            .get_field_by_name(name)
            .or_else(|| message.get_field_by_json_name(name))
        else {
            let fields: Vec<String> = message.fields().map(|f| f.name().to_owned()).collect();
            return Err(err(format!(
                "`{}` has no field `{name}`; its fields: {}",
                message.full_name(),
                fields.join(", ")
            )));
        };
        if field.cardinality() == Cardinality::Repeated {
            return Err(err(format!("`{name}` is repeated: give a singular field")));
        }
        numbers.push(field.number());
        let last = k + 1 == segments.len();
        let kind = field.kind();
        match (last, kind) {
            (false, Kind::Message(m)) => message = m,
            (false, _) => return Err(err(format!("`{name}` is not a message: nothing inside it"))),
            (true, kind) => {
                let kind = match kind {
                    Kind::Uint64 | Kind::Uint32 => NumberKind::Unsigned,
                    Kind::Int64 | Kind::Int32 => NumberKind::Signed,
                    Kind::Sint64 | Kind::Sint32 => NumberKind::Zigzag,
                    Kind::Fixed64 => NumberKind::Fixed64,
                    Kind::Sfixed64 => NumberKind::Sfixed64,
                    Kind::Fixed32 => NumberKind::Fixed32,
                    Kind::Sfixed32 => NumberKind::Sfixed32,
                    Kind::Double => NumberKind::Double,
                    Kind::Float => NumberKind::Float,
                    Kind::Message(m) if m.full_name() == "google.protobuf.Timestamp" => {
                        NumberKind::Timestamp
                    }
                    other => {
                        return Err(err(format!(
                            "`{name}` is {other:?}, not a number or a google.protobuf.Timestamp"
                        )))
                    }
                };
                return Ok(FieldPath {
                    numbers,
                    kind,
                    pointer: pointer.to_owned(),
                });
            }
        }
    }
    unreachable!("the last segment returns")
}

impl UnaryCall {
    /// Decodes one gRPC response frame into the response message type, as proto3 JSON
    /// (fields under their JSON names, fields at their default value omitted).
    ///
    /// The frame must be exactly one uncompressed frame: header and the message it declares.
    pub fn decode_response(&self, frame: &[u8]) -> Result<serde_json::Value, GrpcError> {
        let bytes = frame::decode(frame)?;
        let decode_error = |message: String| GrpcError::Decode {
            message_type: self.output.full_name().to_owned(),
            message,
        };
        let message = DynamicMessage::decode(self.output.clone(), bytes)
            .map_err(|err| decode_error(err.to_string()))?;
        serde_json::to_value(&message).map_err(|err| decode_error(err.to_string()))
    }
}

/// The service's full name in `call` (`package.Service/Method`, `package.Service.Method`,
/// a leading `/` allowed): what server reflection is asked for.
pub fn service_of(call: &str) -> Result<&str, GrpcError> {
    split_call(call).map(|(service, _)| service)
}

/// Splits `package.Service/Method` (or `package.Service.Method`, optionally with a leading
/// `/`) into the service's full name and the method name.
fn split_call(call: &str) -> Result<(&str, &str), GrpcError> {
    let trimmed = call.strip_prefix('/').unwrap_or(call);
    let split = match trimmed.rsplit_once('/') {
        Some(parts) => Some(parts),
        None => trimmed.rsplit_once('.'),
    };
    match split {
        Some((service, method))
            if !service.is_empty()
                && !method.is_empty()
                && !method.contains('.')
                && !service.contains('/')
                && !service.starts_with('.')
                && !service.ends_with('.')
                && !service.contains("..") =>
        {
            Ok((service, method))
        }
        _ => Err(GrpcError::CallSyntax {
            call: call.to_owned(),
        }),
    }
}

/// Compiles `proto` and its imports into a descriptor pool.
fn compile(proto: &Path, include_dirs: &[PathBuf]) -> Result<DescriptorPool, GrpcError> {
    if let Err(err) = std::fs::metadata(proto).and_then(|m| {
        if m.is_file() {
            Ok(())
        } else {
            Err(std::io::Error::other("not a file"))
        }
    }) {
        return Err(GrpcError::Proto {
            file: proto.display().to_string(),
            line: None,
            column: None,
            message: format!("cannot read the file: {err}"),
        });
    }
    let parent = match proto.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_owned(),
        _ => PathBuf::from("."),
    };
    let mut includes = include_dirs.to_vec();
    includes.push(parent);

    let mut compiler =
        protox::Compiler::new(&includes).map_err(|err| proto_error(&err, proto, &includes))?;
    compiler.include_imports(true);
    compiler
        .open_file(proto)
        .map_err(|err| proto_error(&err, proto, &includes))?;
    Ok(compiler.descriptor_pool())
}

/// Turns a `protox` error into [`GrpcError::Proto`], with the file's path and the line and
/// column taken from the error's source span.
fn proto_error(err: &protox::Error, proto: &Path, includes: &[PathBuf]) -> GrpcError {
    let file = match err.file() {
        // The main file, by the path the user gave.
        Some(name) if proto.ends_with(name) => proto.display().to_string(),
        // An imported file: where it was found, else its import name.
        Some(name) => includes
            .iter()
            .map(|dir| dir.join(name))
            .find(|path| path.is_file())
            .map_or_else(|| name.to_owned(), |path| path.display().to_string()),
        None => proto.display().to_string(),
    };
    let (line, column) = match source_location(err) {
        Some((line, column)) => (Some(line), Some(column)),
        None => (None, None),
    };
    GrpcError::Proto {
        file,
        line,
        column,
        message: err.to_string(),
    }
}

/// The 1-based line and column of the first labelled span of a diagnostic.
fn source_location(diagnostic: &dyn miette::Diagnostic) -> Option<(usize, usize)> {
    let source = diagnostic.source_code()?;
    let label = diagnostic.labels()?.next()?;
    let contents = source.read_span(label.inner(), 0, 0).ok()?;
    Some((contents.line() + 1, contents.column() + 1))
}

/// Parses `data` as JSON and converts it into a message of type `desc`.
fn request_message(desc: &MessageDescriptor, data: &str) -> Result<DynamicMessage, GrpcError> {
    let value: serde_json::Value =
        serde_json::from_str(data).map_err(|err| GrpcError::DataSyntax {
            message: err.to_string(),
        })?;
    json::message_from_value(desc, value)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn call_forms() {
        let ok = |call| split_call(call).unwrap();
        assert_eq!(
            ok("helloworld.Greeter/SayHello"),
            ("helloworld.Greeter", "SayHello")
        );
        assert_eq!(
            ok("helloworld.Greeter.SayHello"),
            ("helloworld.Greeter", "SayHello")
        );
        assert_eq!(
            ok("/helloworld.Greeter/SayHello"),
            ("helloworld.Greeter", "SayHello")
        );
        assert_eq!(ok("a.b.c.Svc/M"), ("a.b.c.Svc", "M"));
        assert_eq!(ok("Svc/M"), ("Svc", "M"));
        for bad in [
            "",
            "/",
            "Greeter",
            "Greeter/",
            "/SayHello",
            ".SayHello",
            "Greeter.",
            "a/b/c",
            "pkg.Svc/M.x",
            "pkg..Svc/M",
            ".pkg.Svc/M",
        ] {
            assert!(
                matches!(split_call(bad), Err(GrpcError::CallSyntax { .. })),
                "{bad:?}"
            );
        }
    }
}
