//! Joining a coordinator: the token, the version and the number of agents are checked, and
//! a refused agent says why (with both versions for a mismatch). Loopback only.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use loadlab_engine::CancellationToken;
use loadlab_fleet::{
    run_agent, AgentError, AgentOptions, Coordinator, CoordinatorOptions, FleetError, OnAgentLoss,
};

fn coordinator(agents: usize, wait: Duration) -> Coordinator {
    Coordinator::start(CoordinatorOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        token: "s3cret-token".into(),
        agents,
        probes: 0,
        wait,
        tls: None,
        on_loss: OnAgentLoss::Continue,
        run_stop: CancellationToken::new(),
        log: false,
        version: loadlab_fleet::version(),
    })
    .expect("coordinator starts")
}

fn agent(addr: SocketAddr, name: &str, token: &str, version: &str) -> AgentOptions {
    AgentOptions {
        coordinator: addr.to_string(),
        token: token.into(),
        name: name.into(),
        threads: 1,
        tls_ca: None,
        tls_domain: None,
        version: version.into(),
        wait: Duration::from_secs(5),
        log: false,
    }
}

#[test]
fn a_wrong_token_is_refused_and_the_wait_names_who_joined() {
    let c = coordinator(2, Duration::from_secs(3));
    let addr = c.local_addr();
    let bad = std::thread::spawn(move || {
        run_agent(&agent(addr, "intruder", "guess", &loadlab_fleet::version()))
    });
    let good_opts = agent(addr, "good", "s3cret-token", &loadlab_fleet::version());
    let good = std::thread::spawn(move || run_agent(&good_opts));
    let err = bad.join().unwrap().expect_err("refused");
    match &err {
        AgentError::Refused { code, message, .. } => {
            assert_eq!(*code, tonic::Code::Unauthenticated);
            assert!(message.contains("wrong or missing token"), "{message}");
        }
        other => panic!("expected a refusal, got {other}"),
    }
    // One of two joined: the timeout names it and how many are missing.
    let e = c.wait_for_agents(&CancellationToken::new()).unwrap_err();
    let text = e.to_string();
    assert!(matches!(e, FleetError::Timeout { .. }), "{text}");
    assert!(text.starts_with("1 of 2 agents joined"), "{text}");
    assert!(text.contains("good (127.0.0.1:"), "{text}");
    assert!(text.contains("on 1 more machine"), "{text}");
    c.finish("test over");
    assert_eq!(good.join().unwrap().unwrap(), "test over");
}

#[test]
fn another_version_is_refused_naming_both() {
    let c = coordinator(1, Duration::from_secs(2));
    let opts = agent(
        c.local_addr(),
        "old",
        "s3cret-token",
        "0.0.1 (fleet protocol 0)",
    );
    let err = run_agent(&opts).expect_err("refused");
    let text = err.to_string();
    assert!(
        matches!(
            err,
            AgentError::Refused {
                code: tonic::Code::FailedPrecondition,
                ..
            }
        ),
        "{text}"
    );
    assert!(
        text.contains("agent old runs loadlab 0.0.1 (fleet protocol 0)"),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "this coordinator runs loadlab {}",
            loadlab_fleet::version()
        )),
        "{text}"
    );
    assert!(c.agents().is_empty());
}

#[test]
fn an_agent_too_many_is_refused_and_the_others_leave_on_goodbye() {
    let c = coordinator(1, Duration::from_secs(5));
    let addr = c.local_addr();
    let first_opts = agent(addr, "first", "s3cret-token", &loadlab_fleet::version());
    let first = std::thread::spawn(move || run_agent(&first_opts));
    c.wait_for_agents(&CancellationToken::new()).unwrap();
    let extra = run_agent(&agent(
        addr,
        "extra",
        "s3cret-token",
        &loadlab_fleet::version(),
    ))
    .expect_err("the run is full");
    assert!(
        extra
            .to_string()
            .contains("already has its 1 agents (first)"),
        "{extra}"
    );
    let t = Instant::now();
    c.finish("done");
    assert_eq!(first.join().unwrap().unwrap(), "done");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
}

#[test]
fn an_agent_waits_for_a_coordinator_that_starts_later_and_gives_up_in_time() {
    // Nothing listens on this port yet: the agent retries with backoff.
    let probe = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = probe.local_addr().unwrap();
    drop(probe);
    let mut opts = agent(addr, "early", "s3cret-token", &loadlab_fleet::version());
    opts.wait = Duration::from_millis(700);
    let t = Instant::now();
    let err = run_agent(&opts).expect_err("nobody answered");
    assert!(matches!(err, AgentError::GaveUp { .. }), "{err}");
    assert!(t.elapsed() >= Duration::from_millis(700));
    assert!(t.elapsed() < Duration::from_secs(4), "{:?}", t.elapsed());

    // Started late, it is found.
    opts.wait = Duration::from_secs(10);
    let agent_thread = std::thread::spawn(move || run_agent(&opts));
    std::thread::sleep(Duration::from_millis(500));
    let c = Coordinator::start(CoordinatorOptions {
        listen: addr,
        token: "s3cret-token".into(),
        agents: 1,
        probes: 0,
        wait: Duration::from_secs(10),
        tls: None,
        on_loss: OnAgentLoss::Continue,
        run_stop: CancellationToken::new(),
        log: false,
        version: loadlab_fleet::version(),
    })
    .unwrap();
    c.wait_for_agents(&CancellationToken::new()).unwrap();
    c.finish("over");
    assert_eq!(agent_thread.join().unwrap().unwrap(), "over");
}

#[test]
fn tls_when_the_coordinator_has_a_certificate() {
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    let c = Coordinator::start(CoordinatorOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        token: "s3cret-token".into(),
        agents: 1,
        probes: 0,
        wait: Duration::from_secs(10),
        tls: Some((
            cert.cert.pem().into_bytes(),
            cert.key_pair.serialize_pem().into_bytes(),
        )),
        on_loss: OnAgentLoss::Continue,
        run_stop: CancellationToken::new(),
        log: false,
        version: loadlab_fleet::version(),
    })
    .unwrap();
    let addr = c.local_addr();
    // Plain TCP against a TLS coordinator never gets in.
    let mut plain = agent(addr, "plain", "s3cret-token", &loadlab_fleet::version());
    plain.wait = Duration::from_millis(500);
    assert!(matches!(run_agent(&plain), Err(AgentError::GaveUp { .. })));
    assert!(c.agents().is_empty());
    // Trusting the certificate, it joins.
    let mut tls = agent(addr, "tls", "s3cret-token", &loadlab_fleet::version());
    tls.tls_ca = Some(cert.cert.pem().into_bytes());
    tls.tls_domain = Some("localhost".into());
    let joined = std::thread::spawn(move || run_agent(&tls));
    c.wait_for_agents(&CancellationToken::new()).unwrap();
    assert_eq!(c.agents().len(), 1);
    c.finish("tls ok");
    assert_eq!(joined.join().unwrap().unwrap(), "tls ok");
}
