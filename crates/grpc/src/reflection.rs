//! Server reflection: the service described by the server itself when no `.proto` is given,
//! as grpcurl and ghz do.
//!
//! The protocol (`grpc.reflection.v1.ServerReflection/ServerReflectionInfo`, and the same
//! under `grpc.reflection.v1alpha`, which older servers serve alone) is a bidirectional
//! stream of queries and answers. [`Walk`] decides the queries: the file that defines the
//! service, then every file it imports that the server has not sent yet (a server may send
//! a file's imports with it, as grpc-go does, or only the file, as Python's grpcio does);
//! a service the server does not know is answered with the services it does. The exchange
//! itself (a connection, a stream per query) is the caller's; what comes out is a
//! descriptor set ([`Walk::finish`]) for [`crate::Schema::Set`].

use std::collections::BTreeSet;

use bytes::Bytes;
use prost::Message;

use crate::GrpcError;

/// The reflection services, newest first: a server that does not serve the first
/// (`UNIMPLEMENTED`) is asked on the second.
pub const SERVICES: [&str; 2] = [
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
];

/// The `:path` of the reflection method of `service` (one of [`SERVICES`]).
pub fn path(service: &str) -> String {
    format!("/{service}/ServerReflectionInfo")
}

/// Files taken from a server at most: a walk that goes on past it is refused (a server
/// naming imports without end).
const MAX_FILES: usize = 1000;

/// One query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Query {
    /// The file that defines a symbol (the service), with its imports if the server sends
    /// them.
    Symbol(String),
    /// A file by its name (an import).
    File(String),
    /// The services the server serves.
    Services,
}

impl Query {
    /// The query in a gRPC frame, ready to send on the stream.
    pub fn frame(&self) -> Bytes {
        let query = match self {
            Query::Symbol(s) => Some(wire::Query::FileContainingSymbol(s.clone())),
            Query::File(f) => Some(wire::Query::FileByFilename(f.clone())),
            Query::Services => Some(wire::Query::ListServices(String::new())),
        };
        let message = wire::Request {
            host: String::new(),
            query,
        }
        .encode_to_vec();
        crate::frame::encode(&message)
    }
}

/// What the server answered to one query.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Answer {
    /// Files (`FileDescriptorProto`s, encoded).
    Files(Vec<Vec<u8>>),
    /// The services it serves.
    Services(Vec<String>),
    /// An error: its gRPC status code and message.
    Error {
        /// The status code (5 is `NOT_FOUND`).
        code: i32,
        /// The server's message.
        message: String,
    },
}

/// The answers in a response body: the gRPC frames the server sent on the stream.
pub fn answers(body: &[u8]) -> Result<Vec<Answer>, GrpcError> {
    let bad = |message: String| GrpcError::Reflection { message };
    let mut out = Vec::new();
    let mut rest = body;
    while !rest.is_empty() {
        if rest.len() < 5 {
            return Err(bad(format!(
                "a frame cut short: {} bytes after the last whole one",
                rest.len()
            )));
        }
        if rest[0] != 0 {
            return Err(bad("a compressed answer (loadlab asked for none)".into()));
        }
        let len = u32::from_be_bytes([rest[1], rest[2], rest[3], rest[4]]) as usize;
        let Some(message) = rest.get(5..5 + len) else {
            return Err(bad(format!(
                "a frame of {len} bytes cut short at {}",
                rest.len() - 5
            )));
        };
        let r = wire::Response::decode(message).map_err(|e| {
            bad(format!(
                "an answer that is not a ServerReflectionResponse: {e}"
            ))
        })?;
        out.push(match r.answer {
            Some(wire::Answer::Files(f)) => Answer::Files(f.file_descriptor_proto),
            Some(wire::Answer::Services(s)) => {
                Answer::Services(s.service.into_iter().map(|s| s.name).collect())
            }
            Some(wire::Answer::Error(e)) => Answer::Error {
                code: e.error_code,
                message: e.error_message,
            },
            None => return Err(bad("an answer with nothing in it".into())),
        });
        rest = &rest[5 + len..];
    }
    Ok(out)
}

/// One file taken: its name, what it imports, its encoding.
#[derive(Clone, Debug)]
struct File {
    name: String,
    imports: Vec<String>,
    bytes: Vec<u8>,
}

/// The queries that describe one service, and the files their answers gave.
#[derive(Debug)]
pub struct Walk {
    /// The service's full name.
    service: String,
    files: Vec<File>,
    /// Files asked for by name (asked once each).
    asked: BTreeSet<String>,
    /// The service was not found: the services are asked for, to name them.
    not_found: Option<String>,
    /// The symbol query was answered.
    started: bool,
}

impl Walk {
    /// A walk for `service` (`package.Service`).
    pub fn new(service: &str) -> Walk {
        Walk {
            service: service.to_owned(),
            files: Vec::new(),
            asked: BTreeSet::new(),
            not_found: None,
            started: false,
        }
    }

    /// The next query to send, or `None` when every file is in.
    pub fn next_query(&self) -> Option<Query> {
        if self.not_found.is_some() {
            return Some(Query::Services);
        }
        if !self.started {
            return Some(Query::Symbol(self.service.clone()));
        }
        self.missing()
            .into_iter()
            .find(|f| !self.asked.contains(f))
            .map(Query::File)
    }

    /// Takes the server's answer to `query`. Errors: the service unknown (with the
    /// services the server does serve), an import the server does not have, a file that
    /// is not a `FileDescriptorProto`, an error the server answered.
    pub fn take(&mut self, query: &Query, answer: Answer) -> Result<(), GrpcError> {
        const NOT_FOUND: i32 = 5;
        match (query, answer) {
            (Query::Services, Answer::Services(mut available)) => {
                available.retain(|s| !SERVICES.contains(&s.as_str()));
                available.sort();
                Err(GrpcError::UnknownService {
                    service: self.service.clone(),
                    source_name: format!(
                        "the server's reflection ({})",
                        self.not_found.take().unwrap_or_default()
                    ),
                    available,
                })
            }
            (Query::Symbol(_), Answer::Error { code, message }) if code == NOT_FOUND => {
                self.not_found = Some(message);
                Ok(())
            }
            (Query::File(name), Answer::Error { code, message }) if code == NOT_FOUND => {
                Err(GrpcError::Reflection {
                    message: format!(
                        "the server does not have `{name}`, which its files import ({message}): give the service's .proto with --proto"
                    ),
                })
            }
            (q, Answer::Error { code, message }) => Err(GrpcError::Reflection {
                message: format!("the server answered {q:?} with error {code}: {message}"),
            }),
            (q, Answer::Files(files)) => {
                if let Query::File(name) = q {
                    self.asked.insert(name.clone());
                }
                self.started = true;
                for bytes in files {
                    let head = wire::FileHead::decode(bytes.as_slice()).map_err(|e| {
                        GrpcError::Reflection {
                            message: format!("a file that is not a FileDescriptorProto: {e}"),
                        }
                    })?;
                    if self.files.iter().any(|f| f.name == head.name) {
                        continue;
                    }
                    self.files.push(File {
                        name: head.name,
                        imports: head.dependency,
                        bytes,
                    });
                }
                if self.files.len() > MAX_FILES {
                    return Err(GrpcError::Reflection {
                        message: format!(
                            "more than {MAX_FILES} files for one service: give its .proto with --proto"
                        ),
                    });
                }
                if let Query::File(name) = q {
                    if !self.files.iter().any(|f| &f.name == name) {
                        return Err(GrpcError::Reflection {
                            message: format!("asked for `{name}`, the server sent other files"),
                        });
                    }
                }
                Ok(())
            }
            (q, a) => Err(GrpcError::Reflection {
                message: format!("the server answered {q:?} with {a:?}"),
            }),
        }
    }

    /// Files imported and not taken yet.
    fn missing(&self) -> Vec<String> {
        let mut out = Vec::new();
        for f in &self.files {
            for i in &f.imports {
                if !self.files.iter().any(|g| &g.name == i) && !out.contains(i) {
                    out.push(i.clone());
                }
            }
        }
        out
    }

    /// The files taken, as a descriptor set (`google.protobuf.FileDescriptorSet`), each
    /// file after those it imports. `None` before every import is in.
    pub fn finish(&self) -> Option<Vec<u8>> {
        if !self.started || !self.missing().is_empty() {
            return None;
        }
        // Each file after its imports: repeatedly the files whose imports are all in; an
        // import cycle (protoc refuses them) leaves the rest in the order taken.
        let mut order: Vec<&File> = Vec::with_capacity(self.files.len());
        let placed = |order: &[&File], name: &str| order.iter().any(|f| f.name == name);
        while order.len() < self.files.len() {
            let before = order.len();
            for f in &self.files {
                if !placed(&order, &f.name) && f.imports.iter().all(|i| placed(&order, i)) {
                    order.push(f);
                }
            }
            if order.len() == before {
                for f in &self.files {
                    if !placed(&order, &f.name) {
                        order.push(f);
                    }
                }
            }
        }
        let mut set = Vec::new();
        for f in order {
            // FileDescriptorSet.file = 1.
            prost::encoding::bytes::encode(1, &f.bytes, &mut set);
        }
        Some(set)
    }
}

/// The messages of `grpc/reflection/v1/reflection.proto` this client uses (fields it does
/// not read are skipped by the decoder).
mod wire {
    /// `ServerReflectionRequest`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Request {
        #[prost(string, tag = "1")]
        pub host: String,
        #[prost(oneof = "Query", tags = "3, 4, 7")]
        pub query: Option<Query>,
    }

    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(super) enum Query {
        #[prost(string, tag = "3")]
        FileByFilename(String),
        #[prost(string, tag = "4")]
        FileContainingSymbol(String),
        #[prost(string, tag = "7")]
        ListServices(String),
    }

    /// `ServerReflectionResponse`.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct Response {
        #[prost(oneof = "Answer", tags = "4, 6, 7")]
        pub answer: Option<Answer>,
    }

    #[derive(Clone, PartialEq, prost::Oneof)]
    pub(super) enum Answer {
        #[prost(message, tag = "4")]
        Files(FileDescriptorResponse),
        #[prost(message, tag = "6")]
        Services(ListServiceResponse),
        #[prost(message, tag = "7")]
        Error(ErrorResponse),
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct FileDescriptorResponse {
        #[prost(bytes = "vec", repeated, tag = "1")]
        pub file_descriptor_proto: Vec<Vec<u8>>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct ListServiceResponse {
        #[prost(message, repeated, tag = "1")]
        pub service: Vec<ServiceResponse>,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct ServiceResponse {
        #[prost(string, tag = "1")]
        pub name: String,
    }

    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct ErrorResponse {
        #[prost(int32, tag = "1")]
        pub error_code: i32,
        #[prost(string, tag = "2")]
        pub error_message: String,
    }

    /// The head of a `FileDescriptorProto`: its name and imports.
    #[derive(Clone, PartialEq, prost::Message)]
    pub(super) struct FileHead {
        #[prost(string, tag = "1")]
        pub name: String,
        #[prost(string, repeated, tag = "3")]
        pub dependency: Vec<String>,
    }

    #[cfg(test)]
    pub(super) fn response(answer: Answer) -> Vec<u8> {
        use prost::Message;
        crate::frame::encode(
            &Response {
                answer: Some(answer),
            }
            .encode_to_vec(),
        )
        .to_vec()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `FileDescriptorProto` of `name` importing `imports`, with `body` (a message or a
    /// service, encoded) appended.
    fn file(name: &str, package: &str, imports: &[&str], body: &[u8]) -> Vec<u8> {
        let mut out = wire::FileHead {
            name: name.into(),
            dependency: imports.iter().map(|s| s.to_string()).collect(),
        }
        .encode_to_vec();
        // package = 2, syntax = 12.
        prost::encoding::string::encode(2, &package.to_string(), &mut out);
        prost::encoding::string::encode(12, &"proto3".to_string(), &mut out);
        out.extend_from_slice(body);
        out
    }

    /// A message type `name` with one string field `text` = 1 (`message_type` = 4).
    fn message(name: &str) -> Vec<u8> {
        let mut field = Vec::new();
        prost::encoding::string::encode(1, &"text".to_string(), &mut field); // name
        prost::encoding::int32::encode(3, &1, &mut field); // number
        prost::encoding::int32::encode(4, &1, &mut field); // LABEL_OPTIONAL
        prost::encoding::int32::encode(5, &9, &mut field); // TYPE_STRING
        let mut m = Vec::new();
        prost::encoding::string::encode(1, &name.to_string(), &mut m);
        prost::encoding::bytes::encode(2, &field, &mut m);
        let mut out = Vec::new();
        prost::encoding::bytes::encode(4, &m, &mut out);
        out
    }

    /// A service `name` with a method `Get(input) returns (output)` (`service` = 6).
    fn service(name: &str, input: &str, output: &str) -> Vec<u8> {
        let mut method = Vec::new();
        prost::encoding::string::encode(1, &"Get".to_string(), &mut method);
        prost::encoding::string::encode(2, &input.to_string(), &mut method);
        prost::encoding::string::encode(3, &output.to_string(), &mut method);
        let mut s = Vec::new();
        prost::encoding::string::encode(1, &name.to_string(), &mut s);
        prost::encoding::bytes::encode(2, &method, &mut s);
        let mut out = Vec::new();
        prost::encoding::bytes::encode(6, &s, &mut out);
        out
    }

    fn files(f: &[Vec<u8>]) -> Vec<u8> {
        wire::response(wire::Answer::Files(wire::FileDescriptorResponse {
            file_descriptor_proto: f.to_vec(),
        }))
    }

    #[test]
    fn a_server_that_sends_the_file_alone_is_asked_for_each_import_then_the_call_resolves() {
        // svc.proto imports common.proto, which imports base.proto (as Python's grpcio
        // answers: one file per query).
        let base = file("base.proto", "b", &[], &message("Base"));
        let common = file("common.proto", "c", &["base.proto"], &message("Point"));
        let mut body = message("Empty");
        body.extend(service("Svc", ".c.Point", ".s.Empty"));
        let svc = file("svc.proto", "s", &["common.proto"], &body);
        let mut walk = Walk::new("s.Svc");
        let mut asked = Vec::new();
        while let Some(q) = walk.next_query() {
            asked.push(q.clone());
            let answer = match &q {
                Query::Symbol(s) if s == "s.Svc" => files(std::slice::from_ref(&svc)),
                Query::File(f) if f == "common.proto" => files(std::slice::from_ref(&common)),
                Query::File(f) if f == "base.proto" => files(std::slice::from_ref(&base)),
                q => panic!("{q:?}"),
            };
            let mut a = answers(&answer).unwrap();
            assert_eq!(a.len(), 1);
            walk.take(&q, a.pop().unwrap()).unwrap();
            assert!(asked.len() <= 3, "{asked:?}");
        }
        assert_eq!(
            asked,
            [
                Query::Symbol("s.Svc".into()),
                Query::File("common.proto".into()),
                Query::File("base.proto".into())
            ]
        );
        let set = walk.finish().unwrap();
        // Imports first: the set decodes, and the call resolves against it.
        let call = crate::UnaryCall::resolve_from(
            crate::Schema::Set {
                bytes: &set,
                from: "the server",
            },
            "s.Svc/Get",
            r#"{"text": "hi"}"#,
        )
        .unwrap();
        assert_eq!(call.path(), "/s.Svc/Get");
        assert_eq!(call.request_type(), "c.Point");
    }

    #[test]
    fn a_server_that_sends_the_imports_with_the_file_is_asked_once() {
        let common = file("common.proto", "c", &[], &message("Point"));
        let svc = file(
            "svc.proto",
            "s",
            &["common.proto"],
            &service("Svc", ".c.Point", ".c.Point"),
        );
        let mut walk = Walk::new("s.Svc");
        let q = walk.next_query().unwrap();
        // The file first, its import after it (grpc-go's order): the set puts it first.
        let a = answers(&files(&[svc, common])).unwrap().pop().unwrap();
        walk.take(&q, a).unwrap();
        assert_eq!(walk.next_query(), None);
        let set = walk.finish().unwrap();
        let schema = crate::Schema::Set {
            bytes: &set,
            from: "the server",
        };
        assert!(crate::UnaryCall::resolve_from(schema, "s.Svc/Get", "{}").is_ok());
    }

    #[test]
    fn an_unknown_service_is_answered_with_the_services_the_server_has() {
        let mut walk = Walk::new("s.Nope");
        let q = walk.next_query().unwrap();
        let not_found = wire::response(wire::Answer::Error(wire::ErrorResponse {
            error_code: 5,
            error_message: "Symbol not found: s.Nope".into(),
        }));
        walk.take(&q, answers(&not_found).unwrap().pop().unwrap())
            .unwrap();
        let q = walk.next_query().unwrap();
        assert_eq!(q, Query::Services);
        let list = wire::response(wire::Answer::Services(wire::ListServiceResponse {
            service: ["s.Svc", SERVICES[1], "a.Other"]
                .iter()
                .map(|n| wire::ServiceResponse {
                    name: n.to_string(),
                })
                .collect(),
        }));
        let e = walk
            .take(&q, answers(&list).unwrap().pop().unwrap())
            .unwrap_err()
            .to_string();
        assert_eq!(
            e,
            "service `s.Nope` not found in the server's reflection (Symbol not found: s.Nope); services found: a.Other, s.Svc"
        );
    }

    #[test]
    fn a_missing_import_and_a_malformed_answer_are_named() {
        let svc = file("svc.proto", "s", &["gone.proto"], &[]);
        let mut walk = Walk::new("s.Svc");
        let q = walk.next_query().unwrap();
        walk.take(&q, answers(&files(&[svc])).unwrap().pop().unwrap())
            .unwrap();
        assert!(walk.finish().is_none());
        let q = walk.next_query().unwrap();
        assert_eq!(q, Query::File("gone.proto".into()));
        let not_found = wire::response(wire::Answer::Error(wire::ErrorResponse {
            error_code: 5,
            error_message: "File not found".into(),
        }));
        let e = walk
            .take(&q, answers(&not_found).unwrap().pop().unwrap())
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("does not have `gone.proto`") && e.contains("--proto"),
            "{e}"
        );
        // Frames cut short, compressed, or not a response.
        for body in [&[0u8, 0, 0, 0][..], &[1, 0, 0, 0, 0], &[0, 0, 0, 0, 9, 1]] {
            assert!(answers(body).is_err(), "{body:?}");
        }
        assert_eq!(answers(&[]).unwrap(), []);
    }

    #[test]
    fn queries_are_reflection_requests_in_a_frame() {
        let f = Query::Symbol("s.Svc".into()).frame();
        assert_eq!(f[0], 0);
        assert_eq!(
            u32::from_be_bytes([f[1], f[2], f[3], f[4]]) as usize,
            f.len() - 5
        );
        let r = wire::Request::decode(&f[5..]).unwrap();
        assert_eq!(
            r.query,
            Some(wire::Query::FileContainingSymbol("s.Svc".into()))
        );
        let r = wire::Request::decode(&Query::Services.frame()[5..]).unwrap();
        assert_eq!(r.query, Some(wire::Query::ListServices(String::new())));
    }
}
