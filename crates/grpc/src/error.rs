//! The error type of this crate.

/// What can go wrong while resolving a call, building its request or reading a reply.
///
/// Every message names the thing at fault: the proto file and line, the service or method
/// (with the ones that do exist), the JSON field and its expected type, the metadata entry.
#[derive(Debug, thiserror::Error)]
pub enum GrpcError {
    /// A `.proto` file could not be read, parsed or checked (syntax error, unknown type,
    /// missing import…).
    #[error("{file}{}: {message}", line_column(*.line, *.column))]
    Proto {
        /// The file at fault: the path given for the main file, otherwise the path of the
        /// imported file found in an include directory (or its import name).
        file: String,
        /// 1-based line of the error, when known.
        line: Option<usize>,
        /// 1-based column of the error, when known.
        column: Option<usize>,
        /// What the compiler reported.
        message: String,
    },
    /// The call is not of the form `package.Service/Method` or `package.Service.Method`.
    #[error(
        "invalid call `{call}`: expected `package.Service/Method` or `package.Service.Method`"
    )]
    CallSyntax {
        /// The call as given.
        call: String,
    },
    /// No service of that full name is defined by the proto file or its imports (or the
    /// descriptors the server's reflection or a descriptor set gave).
    #[error("service `{service}` not found in {source_name}; services found: {}", list(.available))]
    UnknownService {
        /// The fully qualified service name that was asked for.
        service: String,
        /// Where it was looked for: the proto file, the descriptor set, the server.
        source_name: String,
        /// The fully qualified names of the services that exist.
        available: Vec<String>,
    },
    /// The service exists but has no method of that name.
    #[error("service `{service}` has no method `{method}`; its methods: {}", list(.available))]
    UnknownMethod {
        /// The fully qualified service name.
        service: String,
        /// The method that was asked for.
        method: String,
        /// The methods the service does have.
        available: Vec<String>,
    },
    /// The request data is not valid JSON.
    #[error("request data is not valid JSON: {message}")]
    DataSyntax {
        /// The JSON parser's message, with line and column.
        message: String,
    },
    /// The request JSON does not fit the request message type.
    #[error("request data does not fit message `{message_type}`: {}{message}", field_prefix(.field))]
    Data {
        /// The fully qualified request message type.
        message_type: String,
        /// Path of the offending field in the JSON, such as `name` or `items[2].id`; empty
        /// when the problem is the top-level value itself.
        field: String,
        /// What is wrong, including the expected type.
        message: String,
    },
    /// A response frame is malformed: too short, a length that does not match, or compressed.
    #[error("invalid gRPC response frame: {message}")]
    Frame {
        /// What is wrong with the frame.
        message: String,
    },
    /// A response message could not be decoded as the response type.
    #[error("cannot decode response as `{message_type}`: {message}")]
    Decode {
        /// The fully qualified response message type.
        message_type: String,
        /// The decoder's message.
        message: String,
    },
    /// A field path (`--sent-at`) that names no number field of the reply message.
    #[error("`{pointer}` in `{message_type}`: {message}")]
    FieldPath {
        /// The path as given.
        pointer: String,
        /// The message type it was looked for in.
        message_type: String,
        /// What is wrong (the fields there are, the type found).
        message: String,
    },
    /// A descriptor set (a `--protoset` file, or what the server's reflection sent) could
    /// not be read or does not hold a consistent set of files.
    #[error("{source_name}: {message}")]
    Descriptors {
        /// Where the descriptors came from: the file, or the server.
        source_name: String,
        /// What is wrong.
        message: String,
    },
    /// The server's reflection answered a query with an error, or not as the protocol says.
    #[error("server reflection: {message}")]
    Reflection {
        /// What the server said (its error code and message), or what was wrong.
        message: String,
    },
    /// A `--metadata` entry is malformed, has an invalid or reserved key, or an invalid value.
    #[error("invalid metadata `{entry}`: {reason}")]
    Metadata {
        /// The entry (or the key, for JSON objects) at fault.
        entry: String,
        /// Why it was rejected.
        reason: String,
    },
}

fn line_column(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(line), Some(column)) => format!(":{line}:{column}"),
        (Some(line), None) => format!(":{line}"),
        _ => String::new(),
    }
}

fn list(items: &[String]) -> String {
    if items.is_empty() {
        "(none)".to_owned()
    } else {
        items.join(", ")
    }
}

fn field_prefix(field: &str) -> String {
    if field.is_empty() {
        String::new()
    } else {
        format!("field `{field}`: ")
    }
}
