//! `loadlab grpc` and `loadlab knee` with no `--proto`: the service described by the
//! server's reflection, as grpcurl and ghz do, and `--protoset` (a compiled descriptor set)
//! in its place.
//!
//! The server: Python's grpcio (Debian's python3-grpcio) with grpcio-reflection (PyPI, the
//! version of the grpcio installed; ./test.sh puts it in target/pydeps), which nobody here
//! wrote. It serves reflection on `v1alpha` only (so `v1` is refused first) and sends each
//! file alone (so the file the service's file imports is asked for by name); the service's
//! request type is defined in that imported file. Its own count of the requests whose bytes
//! were exactly the message asked for is the truth.

mod util;

use std::path::PathBuf;
use std::process::Command;

use util::server::Server;
use util::{grpc, loadlab_bin, output_within, temp_path};

/// Where ./test.sh installs grpcio-reflection.
fn pydeps() -> PathBuf {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/pydeps"));
    assert!(
        dir.join("grpc_reflection").is_dir(),
        "{}: no grpcio-reflection here (./test.sh installs it)",
        dir.display()
    );
    dir
}

/// Python's grpcio on CPU 0 serving `shapes.api.Geometry/Measure(shapes.Point) returns
/// (shapes.api.Area)`, the two files built in its default descriptor pool (`svc.proto`
/// importing `common.proto`, which defines `Point`), with reflection; `reflect` false
/// serves the method without it. A request counts when its bytes are `{"x": 3, "label":
/// "a"}` encoded; any other is answered `INVALID_ARGUMENT`. On SIGTERM it writes the count.
fn geometry(reflect: bool) -> (Server, PathBuf) {
    let py = "import sys, time, grpc, signal, threading\n\
        from concurrent import futures\n\
        sys.path.insert(0, sys.argv[1])\n\
        from google.protobuf import descriptor_pb2 as d, descriptor_pool\n\
        from grpc_reflection.v1alpha import reflection\n\
        def file(name, package, deps=()):\n\
        \x20   f = d.FileDescriptorProto(name=name, package=package, syntax='proto3')\n\
        \x20   f.dependency.extend(deps)\n\
        \x20   return f\n\
        common = file('shapes/common.proto', 'shapes')\n\
        m = common.message_type.add(name='Point')\n\
        m.field.add(name='x', number=1, type=d.FieldDescriptorProto.TYPE_INT64, label=1, json_name='x')\n\
        m.field.add(name='label', number=2, type=d.FieldDescriptorProto.TYPE_STRING, label=1, json_name='label')\n\
        svc = file('shapes/svc.proto', 'shapes.api', ['shapes/common.proto'])\n\
        svc.message_type.add(name='Area').field.add(name='value', number=1, type=d.FieldDescriptorProto.TYPE_INT64, label=1, json_name='value')\n\
        svc.service.add(name='Geometry').method.add(name='Measure', input_type='.shapes.Point', output_type='.shapes.api.Area')\n\
        pool = descriptor_pool.Default()\n\
        pool.AddSerializedFile(common.SerializeToString())\n\
        pool.AddSerializedFile(svc.SerializeToString())\n\
        lock = threading.Lock(); counts = [0]\n\
        def handle(request, context):\n\
        \x20   if request != b'\\x08\\x03\\x12\\x01a':\n\
        \x20       context.abort(grpc.StatusCode.INVALID_ARGUMENT, repr(request))\n\
        \x20   with lock: counts[0] += 1\n\
        \x20   return b'\\x08\\x01'\n\
        rpc = grpc.method_handlers_generic_handler('shapes.api.Geometry', {'Measure': grpc.unary_unary_rpc_method_handler(handle)})\n\
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8))\n\
        server.add_generic_rpc_handlers((rpc,))\n\
        if sys.argv[2] == 'reflect':\n\
        \x20   reflection.enable_server_reflection(('shapes.api.Geometry', reflection.SERVICE_NAME), server)\n\
        port = server.add_insecure_port('127.0.0.1:0')\n\
        server.start()\n\
        def bye(*_):\n\
        \x20   with lock: text = str(counts[0])\n\
        \x20   with open(sys.argv[-1], 'w') as f: f.write(text)\n\
        \x20   import os; os._exit(0)\n\
        signal.signal(signal.SIGTERM, bye)\n\
        print('port', port, flush=True)\n\
        while True: time.sleep(1)\n";
    let counts = temp_path("geometry-counts");
    let mut cmd = Command::new("taskset");
    cmd.args(["-c", "0", "/usr/bin/python3", "-c", py])
        .arg(pydeps())
        .arg(if reflect { "reflect" } else { "plain" })
        .arg(&counts);
    let server = Server::spawn(cmd, |l| l.strip_prefix("port ")?.parse().ok());
    (server, counts)
}

/// The requests the server counted (its counts file, written on SIGTERM).
fn served(mut server: Server, counts: &std::path::Path) -> u64 {
    util::server::stop_and_read_counts(&mut server, counts)[0]
}

const CALL: &str = "shapes.api.Geometry/Measure";
const MESSAGE: &str = r#"{"x": "3", "label": "a"}"#;

#[test]
#[ignore = "needs Python's grpcio and grpcio-reflection (./test.sh installs them)"]
fn a_call_described_by_the_servers_reflection_and_its_import_reaches_the_server_intact() {
    let (server, counts) = geometry(true);
    let addr = format!("127.0.0.1:{}", server.port);
    let r = grpc(&[
        &addr,
        "--call",
        CALL,
        "-D",
        MESSAGE,
        "-n",
        "300",
        "-c",
        "1",
        "--concurrency",
        "8",
    ]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    let j = r.json();
    assert_eq!(j["successful"], 300, "{j}");
    assert_eq!(j["grpc_status"]["OK"], 300, "{j}");
    // Every request was the message asked for, encoded by the descriptors the server sent.
    assert_eq!(served(server, &counts), 300);
}

#[test]
#[ignore = "needs Python's grpcio and grpcio-reflection (./test.sh installs them)"]
fn an_unknown_service_is_named_with_the_ones_the_server_has_and_a_mistaken_field_with_its_type() {
    let (server, counts) = geometry(true);
    let addr = format!("127.0.0.1:{}", server.port);
    let r = grpc(&[&addr, "--call", "shapes.api.Nope/Measure", "-n", "5"]);
    assert_eq!(r.code(), Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("server reflection")
            && r.stderr
                .contains("service `shapes.api.Nope` not found in the server's reflection")
            && r.stderr.contains("services found: shapes.api.Geometry")
            && r.stderr.contains("--proto"),
        "{}",
        r.stderr
    );
    // The message is checked against the reflected type, before any load.
    let r = grpc(&[&addr, "--call", CALL, "-D", r#"{"y": 1}"#, "-n", "5"]);
    assert_eq!(r.code(), Some(2), "{}", r.stderr);
    assert!(
        r.stderr
            .contains("field `y`: unknown field; the fields of `shapes.Point` are: x, label"),
        "{}",
        r.stderr
    );
    assert_eq!(served(server, &counts), 0);
}

#[test]
#[ignore = "needs Python's grpcio and grpcio-reflection (./test.sh installs them)"]
fn a_server_without_reflection_or_no_server_is_an_error_that_says_to_give_the_proto() {
    let (server, counts) = geometry(false);
    let addr = format!("127.0.0.1:{}", server.port);
    let r = grpc(&[&addr, "--call", CALL, "-D", MESSAGE, "-n", "5"]);
    assert_eq!(r.code(), Some(2), "{}", r.stderr);
    assert!(
        r.stderr.contains("the server does not serve reflection")
            && r.stderr
                .contains("grpc.reflection.v1alpha.ServerReflection")
            && r.stderr.contains("give the service's .proto with --proto"),
        "{}",
        r.stderr
    );
    assert_eq!(served(server, &counts), 0);
    // Nothing listening: the connection named.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let r = grpc(&[&format!("127.0.0.1:{port}"), "--call", CALL, "-n", "5"]);
    assert_eq!(r.code(), Some(2), "{}", r.stderr);
    assert!(
        r.stderr
            .contains(&format!("cannot connect to 127.0.0.1:{port}")),
        "{}",
        r.stderr
    );
}

#[test]
#[ignore = "needs Python's grpcio and grpcio-reflection (./test.sh installs them)"]
fn knee_keeps_the_reflected_descriptors_in_its_bundle_and_they_serve_as_a_protoset() {
    let (server, counts) = geometry(true);
    let addr = format!("127.0.0.1:{}", server.port);
    let out = temp_path("reflected-knee");
    let (o, _) = output_within(
        Command::new(loadlab_bin())
            .args(["knee", "-q", &addr, "--call", CALL, "-D", MESSAGE])
            .args(["--start", "50", "--max", "100", "--step", "1s"])
            .args(["--warmup", "200ms", "--pause", "200ms", "--out"])
            .arg(&out),
        std::time::Duration::from_secs(120),
    );
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(0), "{stderr}");
    let set = out.join("reflected.protoset");
    let plan = std::fs::read_to_string(out.join("plan.toml")).unwrap();
    assert!(
        plan.contains(&format!("protoset = \"{}\"", set.display())) && !plan.contains("proto ="),
        "{plan}"
    );
    // Its steps were answered (the knee is above 100 req/s, or nowhere).
    let steps = util::lab::lines(&out.join("steps.jsonl"));
    assert!(!steps.is_empty());
    let answered: u64 = steps
        .iter()
        .map(|s| s["result"]["successful"].as_u64().unwrap())
        .sum();
    assert!(answered > 0, "{steps:?}");
    // The same descriptors, given as a descriptor set, describe the call.
    let r = grpc(&[
        &addr,
        "--protoset",
        &set.display().to_string(),
        "--call",
        CALL,
        "-D",
        MESSAGE,
        "-n",
        "50",
        "-c",
        "1",
        "--concurrency",
        "4",
    ]);
    assert_eq!(r.code(), Some(0), "{}", r.stderr);
    assert_eq!(r.json()["successful"], 50);
    // Warm-ups included, every request the server counted was the message asked for.
    let served = served(server, &counts);
    assert!(served >= answered + 50, "{served} < {answered} + 50");
}
