//! `loadlab lab` with gRPC scenarios: plan mistakes in the gRPC fields stop before any load,
//! closed-loop steps are stream counts over fixed connections, a target that exits with its
//! `unavailable_exit` status is reported unavailable (with its reason) while the other
//! configurations run, and the report puts the configurations side by side.

mod util;

use util::lab::{assert_plans_rejected, lab_ok, lines, write_plan};
use util::{helloworld_proto, temp_path};

fn grpc_plan(scenario_extra: &str) -> String {
    format!(
        "name = \"g\"\n[[scenario]]\nname = \"s\"\nprotocol = \"grpc\"\nurl = \"http://127.0.0.1:1\"\nproto = {:?}\n{scenario_extra}\n[load]\nmodel = \"closed\"\nsteps = [1]\n",
        helloworld_proto()
    )
}

/// A gRPC mistake stops the binary before any load (the other cases are unit tests of
/// `loadlab_lab::plan`).
#[test]
fn grpc_plan_mistakes_name_their_field() {
    let ticker = concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto/ticker.proto");
    let cases = [
        (
            grpc_plan("call = \"helloworld.Greeter/Nope\""),
            "scenario[0].call",
        ),
        // A server stream is held, not offered at a rate.
        (
            grpc_plan("call = \"ticker.Ticker/Subscribe\"")
                .replace(&helloworld_proto(), ticker)
                .replace("model = \"closed\"", "model = \"open\""),
            "its streams are held",
        ),
    ];
    assert_plans_rejected("gbad", &cases);
}

#[test]
fn grpc_steps_and_an_unavailable_runtime() {
    let plan = format!(
        r#"
name = "rt"
[[target]]
name = "greeter"
shell = true
command = ["if [ {{runtime}} = none ]; then echo 'greeter-none: io_uring is not available here: raise the memlock limit' >&2; exit 3; fi; exec '{{loadlab}}' serve greeter-{{runtime}} --bind 127.0.0.1:{{port}} --threads 1"]
ready = {{ tcp = "127.0.0.1:{{port}}" }}
ready_timeout = "10s"
unavailable_exit = 3
cpus = "0"

[matrix]
runtime = ["tokio", "none"]

[[scenario]]
name = "say_hello"
protocol = "grpc"
url = "http://127.0.0.1:{{port}}"
proto = {proto:?}
call = "helloworld.Greeter/SayHello"
message = '{{"name": "t"}}'
requests = 300

[load]
model = "closed"
steps = [4, 16]
connections = 2
threads = 1
cpus = "1"
step_duration = "10s"
"#,
        proto = helloworld_proto()
    );
    let plan = write_plan("rt", &plan);
    let out = temp_path("rt-bundle");
    lab_ok(&plan, &out);
    let configs = lines(&out.join("configs.jsonl"));
    let status = |id: &str| {
        configs
            .iter()
            .find(|c| c["config"] == id)
            .unwrap_or_else(|| panic!("no {id} in {configs:?}"))
            .clone()
    };
    assert_eq!(status("runtime=tokio")["status"], "completed");
    let none = status("runtime=none");
    assert_eq!(none["status"], "unavailable", "{none}");
    assert!(
        none["message"].as_str().unwrap().contains("memlock"),
        "{none}"
    );

    let steps = util::lab::steps(&out);
    assert_eq!(steps.len(), 2, "{steps:?}");
    for (s, load) in steps.iter().zip([4.0, 16.0]) {
        let r = &s["result"];
        util::assert_schema_valid(r);
        assert_eq!(s["load"], load);
        assert_eq!(r["protocol"], "grpc");
        assert_eq!(r["concurrency"], load);
        assert_eq!(r["connections"], 2);
        assert_eq!(r["requests"], 300);
        assert_eq!(r["grpc_status"]["OK"], 300);
    }

    let report = std::fs::read_to_string(out.join("report.md")).unwrap();
    assert!(report.contains("## Side by side: say_hello"), "{report}");
    assert!(report.contains("by concurrent streams"), "{report}");
    assert!(
        report.contains("| runtime=none | unavailable | unavailable |"),
        "{report}"
    );
    assert!(report.contains("unavailable on this machine"), "{report}");
}
