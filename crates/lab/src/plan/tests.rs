//! Plans accepted and refused, checked on the text (no binary spawned): every mistake names
//! its dotted field, and a valid plan becomes the values the engine runs.

use std::path::Path;

use super::*;
use loadlab_engine::config::{Field, Transport};
use loadlab_engine::LoadModel;

fn parse(text: &str) -> Result<Plan, PlanError> {
    Plan::parse(text, "test.toml", Path::new("."), false)
}

fn refused(text: &str) -> String {
    match parse(text) {
        Ok(_) => panic!("accepted:\n{text}"),
        Err(e) => e.to_string(),
    }
}

const SCENARIO: &str = "[[scenario]]\nname=\"s\"\nurl=\"http://127.0.0.1:1/\"\n";

fn with(scenario_extra: &str, load: &str) -> String {
    format!("name = \"x\"\n{SCENARIO}{scenario_extra}\n[load]\n{load}\n")
}

fn helloworld_proto() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto/helloworld.proto").into()
}

fn grpc(extra: &str) -> String {
    format!(
        "name = \"g\"\n[[scenario]]\nname = \"s\"\nprotocol = \"grpc\"\nurl = \"http://127.0.0.1:1\"\nproto = {:?}\n{extra}\n[load]\nmodel = \"closed\"\nsteps = [1]\n",
        helloworld_proto()
    )
}

#[test]
fn mistakes_name_their_field() {
    let cases = [
        ("name = \"x\"\n[load]\nsteps=[1]\n".to_string(), "scenario"),
        (format!("name = \"x\"\nbogus = 1\n{SCENARIO}[load]\nsteps=[1]\n"), "unknown field `bogus`"),
        ("name = \"x\"\n[[scenario]]\nname=\"s\"\nurl=\"http://127.0.0.1:{nope}/\"\n[load]\nsteps=[1]\n".to_string(), "scenario[0].url"),
        (with("", "steps=[0]"), "load.steps"),
        (with("", "steps=[1]\nknee={start=1,max=2}"), "exactly one of"),
        (with("timeout=\"soon\"", "steps=[1]"), "scenario[0].timeout"),
        (with("", "model=\"sideways\"\nsteps=[1]"), "load.model"),
        (with("", "knee={start=10,max=100,precision=2}"), "load.knee.precision"),
        (with("", "steps=[1]\n[slo]\nmax_error_rate=3"), "slo.max_error_rate"),
        (format!("name = \"x\"\n[matrix]\nw=[1]\n[[exclude]]\nq=1\n{SCENARIO}[load]\nsteps=[1]\n"), "exclude[0].q"),
        // Excludes that leave nothing to run.
        (format!("name = \"x\"\n[matrix]\nw=[1,2]\n[[exclude]]\nw=1\n[[exclude]]\nw=2\n{SCENARIO}[load]\nsteps=[1]\n"), "exclude = all 2 configurations is not allowed: at least one configuration left by the [[exclude]] tables"),
        (with("", "steps=[1]\ncpus=\"1-0\""), "load.cpus"),
        (with("", "steps=[1]\nio=\"kqueue\""), "load.io"),
        (format!("name = \"x\"\n[[target]]\nname=\"a\"\ncommand=[\"x\"]\nready={{}}\n{SCENARIO}[load]\nsteps=[1]\n"), "target[0].ready"),
        (with("", "steps=[1]\narrival=\"bursty\""), "load.arrival"),
        (with("", "steps=[1]\nsource_addrs=\"127.0.0.9-127.0.0.2\""), "load.source_addrs"),
        (with("protocol = \"h3\"", "steps=[1]"), "scenario[0].protocol"),
        // A billion configurations: refused by counting, before anything is expanded.
        (
            {
                let values = (0..1000).map(|i| i.to_string()).collect::<Vec<_>>().join(",");
                format!("name = \"x\"\n[matrix]\na=[{values}]\nb=[{values}]\nc=[{values}]\n{SCENARIO}[load]\nsteps=[1]\n")
            },
            "matrix = 1000000000 configurations (a: 1000, b: 1000, c: 1000)",
        ),
        (with("", "steps=[1e9]"), "load.steps"),
        // Waits a plan sets are bounded, and so is the knee search's climb.
        (with("", "knee={start=10,max=100000,growth=1.000001}"), "load.knee.growth = 1.000001 is not allowed: a factor that reaches max from start in at most 100 steps (here 9210345): at least 1.0965"),
        (with("", "steps=[1]\npause=\"1000h\""), "load.pause = \"1000h\" is not allowed: at most 1h"),
        (with("", "steps=[1]\nstep_duration=\"9h\""), "load.step_duration = \"9h\" is not allowed: at most 8h"),
        (with("", "steps=[1]\nwarmup=\"2h\""), "load.warmup"),
        (with("timeout=\"2h\"", "steps=[1]"), "scenario[0].timeout"),
        (format!("name = \"x\"\n[[target]]\nname=\"a\"\ncommand=[\"x\"]\nready={{tcp=\"127.0.0.1:1\"}}\nready_timeout=\"2h\"\n{SCENARIO}[load]\nsteps=[1]\n"), "target[0].ready_timeout = \"2h\" is not allowed: at most 1h"),
        (format!("name = \"x\"\n[[target]]\nname=\"a\"\ncommand=[\"x\"]\nready={{tcp=\"127.0.0.1:1\"}}\nstop_grace=\"1h\"\n{SCENARIO}[load]\nsteps=[1]\n"), "target[0].stop_grace = \"1h\" is not allowed: at most 10m"),
        (format!("name = \"x\"\n[[target]]\nname=\"../../tmp/x\"\ncommand=[\"x\"]\nready={{tcp=\"127.0.0.1:1\"}}\n{SCENARIO}[load]\nsteps=[1]\n"), "target.name = \"../../tmp/x\" is not allowed"),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let e = refused(text);
        assert!(e.contains(needle), "case {i}: expected `{needle}` in {e}");
    }
}

#[test]
fn engine_checks_run_when_the_plan_loads_and_name_the_plan_field() {
    // Found by the engine's validation, reported with the plan's own keys.
    let cases = [
        (with("method = \"G E T\"", "steps=[1]"), "scenario[0].method"),
        (with("headers = [\"no colon\"]", "steps=[1]"), "scenario[0].headers"),
        (
            with("protocol = \"http2\"\nheaders = [\"Connection: close\"]", "steps=[1]"),
            "scenario[0].headers",
        ),
        (with("", "steps=[100]\nconnections=8\nmax_connections=4"), "load.max_connections"),
        (
            with("protocol = \"http2\"", "steps=[100]\nconnections=8\nconcurrency=4"),
            "load.concurrency",
        ),
        (with("", "steps=[1]\nthreads=0"), "load.threads"),
        (
            "name = \"x\"\n[[scenario]]\nname=\"s\"\nurl=\"http://[::1]:1/\"\n[load]\nsteps=[1]\nsource_addrs=\"4\"\n".to_string(),
            "load.source_addrs",
        ),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let e = refused(text);
        assert!(e.contains(needle), "case {i}: expected `{needle}` in {e}");
        assert!(
            !e.contains("--"),
            "case {i}: a plan error names no flag: {e}"
        );
    }
}

#[test]
fn grpc_mistakes_name_their_field() {
    let cases = [
        (
            grpc("call = \"helloworld.Greeter/Nope\""),
            "scenario[0].call",
        ),
        (grpc("call = \"helloworld.Greeter/Nope\""), "SayHello"),
        (grpc(""), "scenario[0].call"),
        (
            grpc("call = \"helloworld.Greeter/SayHello\"\ndata = '{\"name\": 1}'"),
            "name",
        ),
        (
            grpc("call = \"helloworld.Greeter/SayHello\"\nkeep_alive = false"),
            "scenario[0].keep_alive",
        ),
        (
            grpc("call = \"helloworld.Greeter/SayHello\"\nclose_by = \"client\""),
            "scenario[0].close_by",
        ),
        (
            grpc("call = \"helloworld.Greeter/SayHello\"\nmetadata = [\"no colon\"]"),
            "scenario[0].metadata",
        ),
        (
            grpc("call = \"helloworld.Greeter/SayHello\"").replace("\"grpc\"", "\"h3\""),
            "scenario[0].protocol",
        ),
        (
            grpc("call = \"helloworld.Greeter/SayHello\"").replace("\"grpc\"", "\"http1\""),
            "scenario[0].proto",
        ),
    ];
    for (i, (text, needle)) in cases.iter().enumerate() {
        let e = refused(text);
        assert!(e.contains(needle), "case {i}: expected `{needle}` in {e}");
    }
}

#[test]
fn a_valid_plan_becomes_typed_values_and_workloads() {
    let text = "name = \"ok\"\n[matrix]\nworkers = [2, 4]\n[[target]]\nname = \"srv\"\ncommand = [\"x\", \"--workers\", \"{workers}\"]\nready = { tcp = \"127.0.0.1:{port}\" }\n[[scenario]]\nname = \"s\"\nurl = \"http://127.0.0.1:{port}/w/{workers}\"\nheaders = [\"X-W: {workers}\"]\n[load]\nsteps = [100, 200]\narrival = \"poisson\"\nsource_addrs = \"4\"\ncpus = \"1\"\nio = \"uring\"\n".to_string();
    let plan = parse(&text).unwrap();
    assert_eq!(plan.load.model, Model::Open);
    assert_eq!(
        plan.load.connections, 64,
        "the engine's default, as for `loadlab run`"
    );
    assert_eq!(plan.load.source_addrs.as_ref().map(|s| s.len()), Some(4));
    assert_eq!(plan.load.cpus, vec![1]);
    assert_eq!(plan.load.io, loadlab_engine::config::IoMode::Uring);
    let vars = [("port", "8080"), ("workers", "4")]
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .into_iter()
        .collect();
    let w = plan.workload(&plan.scenarios[0], &vars, Some(200.0), None);
    assert_eq!(w.url, "http://127.0.0.1:8080/w/4");
    assert_eq!(
        w.io,
        loadlab_engine::config::IoMode::Uring,
        "load.io reaches the run"
    );
    assert_eq!(w.request.headers, vec!["X-W: 4".to_string()]);
    assert_eq!(
        w.load,
        LoadModel::Open {
            rate: 200.0,
            arrival: loadlab_engine::Arrival::Poisson
        }
    );
    assert!(matches!(
        w.transport,
        Transport::Http1 {
            keep_alive: true,
            ..
        }
    ));
    let cfg = w.validate().unwrap();
    assert_eq!(cfg.source_addrs.len(), 4);
    // The plan as stored in a bundle reads back into the same types.
    let json = serde_json::to_string(&plan).unwrap();
    let back: Plan = serde_json::from_str(&json).unwrap();
    assert_eq!(back.load.steps, plan.load.steps);
    assert_eq!(back.scenarios[0].url, plan.scenarios[0].url);
    assert_eq!(back.load.source_addrs, plan.load.source_addrs);
}

#[test]
fn closed_loop_http2_steps_are_streams_over_the_plan_connections() {
    let plan = parse(&with(
        "protocol = \"http2\"",
        "model = \"closed\"\nsteps = [4, 64]\nconnections = 8",
    ))
    .unwrap();
    let vars = Default::default();
    let w = plan.workload(&plan.scenarios[0], &vars, Some(4.0), None);
    assert_eq!(w.connections, 4);
    assert_eq!(
        w.transport,
        Transport::Http2 {
            concurrency: Some(4)
        }
    );
    let w = plan.workload(&plan.scenarios[0], &vars, Some(64.0), None);
    assert_eq!(w.connections, 8);
    assert_eq!(
        w.transport,
        Transport::Http2 {
            concurrency: Some(64)
        }
    );
    let _ = Field::Url;
}

#[test]
fn quick_applies_before_validation() {
    let text = with("", "steps=[1000]\n[quick]\nsteps=[0]");
    assert!(parse(&text).is_ok());
    let e = Plan::parse(&text, "t", Path::new("."), true)
        .unwrap_err()
        .to_string();
    assert!(e.contains("load.steps"), "{e}");
}

#[test]
fn a_plan_named_without_a_directory_lives_in_the_current_one() {
    let here = std::env::current_dir().unwrap();
    assert_eq!(plan_dir(Path::new("p.toml")), here.join("."));
    assert_eq!(plan_dir(Path::new("plans/p.toml")), here.join("plans"));
    assert_eq!(plan_dir(Path::new("/a/b/p.toml")), Path::new("/a/b"));
}

#[test]
fn the_kubernetes_plan_loads() {
    // deploy/kubernetes/plan.toml is mounted into the coordinator's pod: it must stay valid.
    // It loads the server's pod (server.yaml) through its Service, and starts nothing.
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy/kubernetes/plan.toml");
    let plan = Plan::load(&path, false).expect("deploy/kubernetes/plan.toml is a valid plan");
    assert_eq!(plan.scenarios.len(), 1);
    assert_eq!(plan.scenarios[0].url, "http://loadlab-server:8080/health");
    assert!(plan.targets.is_empty());
}

#[test]
fn slo_gates_in_run_syntax_tighten_the_bounds() {
    let p = parse(&format!(
        "{}\n[slo]\np99_ms = 300\ngates = [\"p95<100ms\", \"errors<0.5%\", \"achieved>=0.99\", \"p99<=200ms\", \"p95<150ms\"]\n",
        with("", "steps = [10]")
    ))
    .unwrap();
    assert_eq!(p.slo.p99_ms, Some(200.0));
    assert_eq!(
        p.slo.percentiles,
        vec![PercentileBound {
            percentile: 95.0,
            ms: 100.0
        }]
    );
    assert_eq!(p.slo.max_error_rate, 0.005);
    assert_eq!(p.slo.min_achieved_ratio, 0.99);
    assert_eq!(
        p.slo.latency_words(),
        vec!["p95 latency at most 100 ms", "p99 latency at most 200 ms"]
    );
    for (gate, says) in [
        (
            "mean<5ms",
            "mean, max and req/s bounds are for `loadlab run`",
        ),
        ("p99>5ms", "a latency percentile from above"),
        ("achieved>=500/s", "a fraction of the offered rate"),
        ("p42<1s", "`p42` is not a percentile a gate takes"),
    ] {
        let e = refused(&format!(
            "{}\n[slo]\ngates = [\"p99<1s\", {gate:?}]\n",
            with("", "steps = [10]")
        ));
        assert!(e.contains("slo.gates[1]"), "{e}");
        assert!(e.contains(says), "{gate}: {e}");
    }
}
/// A plan whose one target has `build` lines `extra`, over a matrix of `workers`.
fn with_build(extra: &str) -> String {
    format!("name = \"b\"\n[matrix]\nworkers = [1, 2]\n[[target]]\nname = \"app\"\ncommand = [\"x\", \"{{workers}}\"]\nready = {{ tcp = \"127.0.0.1:{{port}}\" }}\n{extra}\n{SCENARIO}[load]\nsteps = [1]\n")
}

#[test]
fn build_mistakes_name_their_field() {
    let cases = [
        ("build = []", "target[0].build = [] is not allowed: a program and its arguments"),
        ("build = \"make\"", "target[0].build = \"make\" is not allowed: a program and its arguments, e.g. [\"cargo\", \"build\", \"--release\"] (or, with build_shell = true, one string for sh -c"),
        ("build = [\"make\", 1]", "target[0].build[1] = 1 is not allowed: a string"),
        ("build = [\"make\", [\"-j\"]]", "target[0].build[1]"),
        ("build = [\"\"]", "target[0].build[0] = \"\" is not allowed"),
        ("build = [\"make\", \"all\"]\nbuild_shell = true", "target[0].build = [\"make\", \"all\"] is not allowed: one string when build_shell = true"),
        ("build_shell = true", "target[0].build_shell = true is not allowed: only with build = [...]"),
        ("build_timeout = \"1m\"", "target[0].build_timeout = \"1m\" is not allowed: only with build = [...]"),
        ("build = [\"make\"]\nbuild_timeout = \"soon\"", "target[0].build_timeout = \"soon\" is not allowed: a duration"),
        ("build = [\"make\"]\nbuild_timeout = \"0s\"", "target[0].build_timeout = \"0s\" is not allowed: above 0"),
        ("build = [\"make\"]\nbuild_timeout = \"7h\"", "target[0].build_timeout = \"7h\" is not allowed: at most 6h"),
        // Placeholders set per configuration: a build runs once, before the first.
        ("build = [\"make\", \"W={workers}\"]", "target[0].build[1] = \"W={workers}\" is not allowed: {workers} is set per configuration, and a build runs once, before the first; a build may use {bundle}, {loadlab}, {plan_dir}"),
        ("build = [\"make\", \"{port}\"]", "target[0].build[1] = \"{port}\" is not allowed: {port} is set per configuration"),
        ("build = [\"make\", \"{app_port}\"]", "{app_port} is set per configuration"),
        ("build = [\"make -C {files}\"]\nbuild_shell = true", "target[0].build[0] = \"make -C {files}\" is not allowed: {files} is set per configuration"),
        ("build = [\"make\", \"{nope}\"]", "target[0].build[1] = \"{nope}\" is not allowed: unknown placeholder {nope}; a build may use"),
        ("build = [\"make\"]\nbuild_env = {}", "unknown field `build_env`"),
    ];
    for (i, (extra, needle)) in cases.iter().enumerate() {
        let e = refused(&with_build(extra));
        assert!(e.contains(needle), "case {i}: expected `{needle}` in {e}");
    }
}

#[test]
fn a_build_is_validated_into_its_spec() {
    let plan = parse(&with_build(
        "build = [\"mvn\", \"-f\", \"{plan_dir}/pom.xml\", \"-Dout={bundle}\", \"-Dl={loadlab}\", \"{{literal}}\"]",
    ))
    .unwrap();
    let b = plan.targets[0].build.clone().expect("a build");
    assert_eq!(
        b,
        BuildSpec {
            command: [
                "mvn",
                "-f",
                "{plan_dir}/pom.xml",
                "-Dout={bundle}",
                "-Dl={loadlab}",
                "{{literal}}"
            ]
            .map(String::from)
            .to_vec(),
            shell: false,
            timeout: DEFAULT_BUILD_TIMEOUT,
        }
    );
    let shell = parse(&with_build(
        "build = [\"cd {plan_dir} && make\"]\nbuild_shell = true\nbuild_timeout = \"90s\"",
    ))
    .unwrap();
    let b = shell.targets[0].build.clone().unwrap();
    assert!(b.shell);
    assert_eq!(b.timeout, Duration::from_secs(90));
    // A target's `shell` is its command's, not its build's.
    let e = refused(&with_build("shell = true\nbuild = [\"make\", \"all\"]"));
    assert!(e.contains("target[0].command"), "{e}");
    // The build survives the bundle's plan.json.
    let back: Plan = serde_json::from_str(&serde_json::to_string(&shell).unwrap()).unwrap();
    assert_eq!(back.targets[0].build, shell.targets[0].build);
    assert!(parse(&with_build("")).unwrap().targets[0].build.is_none());
}

#[test]
fn the_plan_directory_is_absolute_whatever_it_was_given_as() {
    let text = format!("name = \"d\"\n[[target]]\nname = \"app\"\ncommand = [\"x\"]\ncwd = \"srv\"\nready = {{ tcp = \"127.0.0.1:{{port}}\" }}\n{SCENARIO}[load]\nsteps = [1]\n");
    let here = std::env::current_dir().unwrap();
    let plan = parse(&text).unwrap();
    assert!(plan.dir.is_absolute(), "{}", plan.dir.display());
    assert_eq!(plan.dir, here);
    assert_eq!(plan.targets[0].cwd, here.join("srv"));
    let nested = Plan::parse(&text, "t", Path::new("sub"), false).unwrap();
    assert_eq!(nested.dir, here.join("sub"));
    assert_eq!(nested.targets[0].cwd, here.join("sub").join("srv"));
}

#[test]
fn only_open_loop_poisson_steps_limit_a_knee_search_by_their_counts() {
    let load = |extra: &str| {
        parse(&with(
            "",
            &format!("knee={{start=10,max=100}}\nstep_duration=\"4s\"\n{extra}"),
        ))
        .unwrap()
        .load
    };
    assert_eq!(load("arrival=\"poisson\"").poisson_s(), Some(4.0));
    assert_eq!(load("").poisson_s(), None, "evenly spaced arrivals");
    assert_eq!(
        load("model=\"closed\"\narrival=\"poisson\"").poisson_s(),
        None,
        "closed loop: the values are connections, no arrivals"
    );
}

#[test]
fn tune_step_duration_reads_as_load_step_duration_does() {
    let tune = |d: &str| {
        let text = format!(
            "{}[tune]\nstep_duration = {d:?}\n",
            with("", "knee={start=10,max=100}")
        );
        parse(&text)
    };
    let given = |d: &str| tune(d).unwrap().tune.unwrap().step_duration;
    assert_eq!(given("5s"), Some(Duration::from_secs(5)));
    // A bare number is seconds, as in `load.step_duration` and every flag.
    assert_eq!(given("5"), Some(Duration::from_secs(5)));
    assert_eq!(given("1.5"), Some(Duration::from_millis(1500)));
    for bad in ["0s", "soon", "-1s", "1000d"] {
        let e = tune(bad).expect_err(bad).to_string();
        assert!(e.contains("tune.step_duration"), "{bad}: {e}");
    }
    // The bound is load.step_duration's.
    let over = tune("1000d").unwrap_err().to_string();
    assert!(over.contains("at most"), "{over}");
}

#[test]
fn a_websocket_push_scenario_reads_the_server_time_where_sent_at_points() {
    let text = "name = \"x\"\n[[scenario]]\nname = \"ticks\"\nurl = \"ws://127.0.0.1:1/ticks\"\nbody = \"subscribe\"\npush = true\nsent_at = \"/data/ts\"\n[load]\nmodel = \"closed\"\nsteps = [10, 100]\n";
    let plan = parse(text).unwrap();
    assert_eq!(plan.unit(), "open connections");
    let w = plan.workload(&plan.scenarios[0], &Default::default(), Some(10.0), None);
    assert_eq!(w.connections, 10);
    assert_eq!(w.transport.sent_at(), Some("/data/ts"));
    assert!(matches!(
        w.transport,
        Transport::WebSocket { push: true, .. }
    ));
    // Not a JSON pointer: refused, naming the key and the form.
    let e = refused(&text.replace("/data/ts", "ts"));
    assert!(e.contains("scenario[0].sent_at"), "{e}");
    assert!(e.contains("JSON pointer"), "{e}");
    // Only a WebSocket reply can carry it.
    let e = refused(&with("sent_at = \"/ts\"", "steps = [10]"));
    assert!(e.contains("sent_at"), "{e}");
}

#[test]
fn a_bidirectional_grpc_scenario_matches_its_replies_by_match_field_and_others_refuse_it() {
    let ticker = concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto/ticker.proto");
    let text = format!(
        "name = \"g\"\n[[scenario]]\nname = \"s\"\nprotocol = \"grpc\"\nurl = \"http://127.0.0.1:1\"\nproto = {ticker:?}\ncall = \"ticker.Ticker/Chat\"\nmessage = '{{\"seq\": \"${{seq}}\"}}'\nmatch_field = \"/seq\"\n[load]\nmodel = \"closed\"\nsteps = [1]\n"
    );
    let plan = parse(&text).unwrap();
    let w = plan.workload(&plan.scenarios[0], &Default::default(), Some(1.0), None);
    let m = w.transport.grpc().unwrap().match_field.clone().unwrap();
    assert_eq!((m.request.numbers, m.reply.numbers), (vec![1], vec![1]));
    // A field the messages do not have, a server-streaming method, a non-gRPC scenario.
    let e = refused(&text.replace("match_field = \"/seq\"", "match_field = \"/nope\""));
    assert!(
        e.contains("scenario[0].match_field") && e.contains("seq, text, sent_at_us"),
        "{e}"
    );
    let subscribe = text
        .replace("ticker.Ticker/Chat", "ticker.Ticker/Subscribe")
        .replace("{\"seq\": \"${seq}\"}", "{}");
    let e = refused(&subscribe);
    assert!(
        e.contains("scenario[0].match_field") && e.contains("bidirectional"),
        "{e}"
    );
    let e = refused(
        "name = \"x\"\n[[scenario]]\nname = \"s\"\nurl = \"http://127.0.0.1:1/\"\nmatch_field = \"/seq\"\n[load]\nsteps = [1]\n",
    );
    assert!(
        e.contains("scenario[0].match_field") && e.contains("only with protocol = \"grpc\""),
        "{e}"
    );
}

#[test]
fn a_server_streaming_scenario_with_a_stream_lifetime_opens_streams_at_its_steps_rates() {
    let ticker = concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto/ticker.proto");
    let text = format!(
        "name = \"g\"\n[[scenario]]\nname = \"s\"\nprotocol = \"grpc\"\nurl = \"http://127.0.0.1:1\"\nproto = {ticker:?}\ncall = \"ticker.Ticker/Subscribe\"\nstream_lifetime = \"750ms\"\n[load]\nmodel = \"open\"\nsteps = [4, 8]\n"
    );
    let plan = parse(&text).unwrap();
    assert_eq!(plan.scenarios[0].protocol, Protocol::GrpcStreamOpens);
    let w = plan.workload(&plan.scenarios[0], &Default::default(), Some(8.0), None);
    assert_eq!(w.transport.grpc().unwrap().lifetime_ms, 750);
    let c = w.validate().unwrap();
    assert_eq!(c.transport.protocol(), Protocol::GrpcStreamOpens);
    assert!(matches!(c.model, LoadModel::Open { rate, .. } if rate == 8.0));
    // Closed steps hold streams: no rate to open them at.
    let e = refused(&text.replace("model = \"open\"", "model = \"closed\""));
    assert!(
        e.contains("scenario[0].stream_lifetime") && e.contains("load.model = \"open\""),
        "{e}"
    );
    // A bidirectional method, and a unary one: no stream of the server's to hold.
    let e = refused(&text.replace("Subscribe", "Chat"));
    assert!(
        e.contains("scenario[0].stream_lifetime") && e.contains("server-streaming"),
        "{e}"
    );
    let e = refused(&grpc(
        "call = \"helloworld.Greeter/SayHello\"\nstream_lifetime = \"1s\"",
    ));
    assert!(e.contains("scenario[0].stream_lifetime"), "{e}");
    let e = refused(&text.replace("750ms", "soon"));
    assert!(e.contains("scenario[0].stream_lifetime"), "{e}");
}

#[test]
fn a_server_streaming_grpc_scenario_reads_sent_at_from_its_messages_and_a_unary_one_refuses_it() {
    let ticker = concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto/ticker.proto");
    let text = format!(
        "name = \"g\"\n[[scenario]]\nname = \"s\"\nprotocol = \"grpc\"\nurl = \"http://127.0.0.1:1\"\nproto = {ticker:?}\ncall = \"ticker.Ticker/Subscribe\"\nsent_at = \"/sent_at_us\"\n[load]\nmodel = \"closed\"\nsteps = [1]\n"
    );
    let plan = parse(&text).unwrap();
    let w = plan.workload(&plan.scenarios[0], &Default::default(), Some(1.0), None);
    assert_eq!(w.transport.sent_at(), Some("/sent_at_us"));
    let field = w.transport.grpc().unwrap().sent_at.clone().unwrap();
    assert_eq!(field.numbers, [2]);
    // A field the message does not have, and a unary method's reply: refused, named.
    let e = refused(&text.replace("/sent_at_us", "/nope"));
    assert!(
        e.contains("scenario[0].sent_at") && e.contains("seq, sent_at_us"),
        "{e}"
    );
    let e = refused(&grpc(
        "call = \"helloworld.Greeter/SayHello\"\nsent_at = \"/message\"",
    ));
    assert!(
        e.contains("scenario[0].sent_at") && e.contains("server-streaming"),
        "{e}"
    );
}

#[test]
fn a_logs_mix_is_read_beside_the_plan_and_its_keys_checked() {
    let dir = std::env::temp_dir().join(format!("loadlab-plan-replay-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let at = "10.0.0.1 - - [14/Nov/2023:22:13:20 +0000]";
    std::fs::write(
        dir.join("access.log"),
        format!(
            "{at} \"GET /users/1 HTTP/1.1\" 200 2\n{at} \"GET /users/2 HTTP/1.1\" 200 2\n{at} \"POST /cart HTTP/1.1\" 201 2\n"
        ),
    )
    .unwrap();
    let text = |extra: &str| with(extra, "steps = [10]");
    let plan = Plan::parse(
        &text("replay_mix = \"access.log\"\nlog_format = \"common\"\nreplay_methods = [\"get\", \"post\"]"),
        "test.toml",
        &dir,
        false,
    )
    .unwrap();
    let t = &plan.scenarios[0].traffic;
    assert_eq!(
        t.requests
            .iter()
            .map(|r| (
                r.name.as_deref().unwrap(),
                r.url.as_str(),
                r.method.as_str()
            ))
            .collect::<Vec<_>>(),
        [
            ("GET /users/{id}", "/users/1", "GET"),
            ("GET /users/{id}", "/users/2", "GET"),
            ("POST /cart", "/cart", "POST"),
        ]
    );
    assert!(
        t.replay
            .as_deref()
            .unwrap()
            .contains("3 requests read; 3 replayed"),
        "{:?}",
        t.replay
    );
    let refused_in = |extra: &str| {
        Plan::parse(&text(extra), "test.toml", &dir, false)
            .unwrap_err()
            .to_string()
    };
    let named = Plan::parse(
        &text("replay_mix = \"access.log\"\nname_rules = [\"^/users/=users\"]"),
        "test.toml",
        &dir,
        false,
    )
    .unwrap();
    assert_eq!(
        named.scenarios[0].traffic.requests[0].name.as_deref(),
        Some("GET users")
    );
    // Every line of the log is at 22:13:20: a window that ends there holds none.
    let e = refused_in("replay_mix = \"access.log\"\nreplay_to = \"2023-11-14T22:13:20Z\"");
    assert!(e.contains("within the window given"), "{e}");
    let e = refused_in("replay_mix = \"access.log\"\nreplay_from = \"soon\"");
    assert!(
        e.contains("scenario[0].replay_from") && e.contains("not a time"),
        "{e}"
    );
    let e = refused_in("replay_mix = \"access.log\"\nname_rules = [\"^/(=x\"]");
    assert!(e.contains("scenario[0].name_rules"), "{e}");
    let e = refused_in("log_format = \"common\"");
    assert!(
        e.contains("scenario[0].log_format") && e.contains("only with replay or replay_mix"),
        "{e}"
    );
    let e = refused_in("replay_mix = \"nope.log\"");
    assert!(
        e.contains("scenario[0].replay_mix") && e.contains("nope.log"),
        "{e}"
    );
    let e = refused_in("replay_mix = \"access.log\"\nlog_format = \"xml\"");
    assert!(e.contains("scenario[0].log_format"), "{e}");
    let e = refused_in("replay_mix = \"access.log\"\n[[scenario.request]]\nurl = \"/a\"");
    assert!(e.contains("a log or requests"), "{e}");
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_log_at_its_times_counts_steps_in_multiples_of_its_speed_and_is_refused_where_it_cannot_run() {
    let dir = std::env::temp_dir().join(format!("loadlab-plan-timed-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // Two requests in second 20, one in 21, four in 23: 4 s, 1.75 req/s on average.
    let at =
        |s: u32| format!("10.0.0.1 - - [14/Nov/2023:22:13:{s} +0000] \"GET /a HTTP/1.1\" 200 2\n");
    std::fs::write(
        dir.join("access.log"),
        [20, 20, 21, 23, 23, 23, 23].map(at).concat(),
    )
    .unwrap();
    std::fs::write(
        dir.join("untimed.jsonl"),
        "{\"method\":\"GET\",\"url\":\"/a\"}\n",
    )
    .unwrap();
    let parse = |extra: &str, load: &str| Plan::parse(&with(extra, load), "test.toml", &dir, false);
    let plan = parse("replay = \"access.log\"", "steps = [1, 2]").unwrap();
    assert_eq!(plan.unit(), "× the log");
    let t = plan.scenarios[0]
        .traffic
        .timed
        .as_ref()
        .expect("a timed log");
    assert!(plan.scenarios[0]
        .traffic
        .replay
        .as_deref()
        .unwrap()
        .contains("at the log's times"));
    // A step of 1 s (no warm-up) at ×1 replays its busiest second, the fourth: 4 req/s.
    let step = t.step(1.0, Duration::ZERO, Duration::from_secs(1));
    assert_eq!(step.replay.from_ns, 3_000_000_000);
    assert_eq!(step.rate, 4.0);
    assert_eq!(step.duration, Duration::from_secs(1));
    // At ×2 a step of 1 s replays 2 s of the log: the last two seconds, 4 requests, at 4
    // req/s; a step of 4 s at ×2 the whole log, in 2 s.
    let step = t.step(2.0, Duration::ZERO, Duration::from_secs(1));
    assert_eq!((step.replay.from_ns, step.rate), (2_000_000_000, 4.0));
    let step = t.step(2.0, Duration::ZERO, Duration::from_secs(4));
    assert_eq!(step.replay.from_ns, 0);
    assert_eq!(step.duration, Duration::from_secs(2));
    assert_eq!(step.rate, 3.5);
    let refused = |extra: &str, load: &str| parse(extra, load).unwrap_err().to_string();
    for (extra, load, says) in [
        (
            "replay = \"access.log\"",
            "model = \"closed\"\nsteps = [1]",
            "load.model = \"open\"",
        ),
        (
            "replay = \"access.log\"",
            "arrival = \"poisson\"\nsteps = [1]",
            "no load.arrival",
        ),
        (
            "replay = \"access.log\"\nreplay_mix = \"access.log\"",
            "steps = [1]",
            "not both",
        ),
        ("replay = \"untimed.jsonl\"", "steps = [1]", "have no time"),
    ] {
        let e = refused(extra, load);
        assert!(
            e.contains("scenario[0].replay") && e.contains(says),
            "{extra}: {e}"
        );
    }
    std::fs::remove_dir_all(&dir).unwrap();
}
