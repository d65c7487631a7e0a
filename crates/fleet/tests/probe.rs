//! A remote probe and its coordinator, in process over loopback: the probe's hello reaches
//! the lab's probe source, its samples are timed by when they were taken, a second probe
//! and a probe nobody waits for are refused by name, an agent is refused by a coordinator
//! that takes none, and a probe that is gone (or never came) is lost at once for the steps
//! after.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use loadlab_engine::CancellationToken;
use loadlab_fleet::{
    run_agent, run_probe, AgentOptions, Coordinator, CoordinatorOptions, FleetError, OnAgentLoss,
    ProbeError, ProbeOptions,
};
use loadlab_system::cgroup::CgroupLimits;
use loadlab_system::probe::{
    KernelSample, ProbeInfo, ProbeKind, ProbeSource, ProcessSample, SourceSample, TargetLimits,
};

const TOKEN: &str = "s3cret-token";

fn coordinator(agents: usize, probes: usize, wait: Duration) -> Result<Coordinator, FleetError> {
    Coordinator::start(CoordinatorOptions {
        listen: "127.0.0.1:0".parse().unwrap(),
        token: TOKEN.into(),
        agents,
        probes,
        wait,
        tls: None,
        on_loss: OnAgentLoss::Continue,
        run_stop: CancellationToken::new(),
        log: false,
        version: loadlab_fleet::version(),
    })
}

/// A target whose CPU grows by one second per sample, with two CPUs.
struct Fake {
    samples: Arc<AtomicU64>,
}

impl ProbeSource for Fake {
    fn info(&self) -> Option<ProbeInfo> {
        Some(ProbeInfo {
            kind: ProbeKind::Listener,
            pid: Some(812),
            comm: Some("gunicorn".into()),
            cgroup: None,
            cgroup_version: None,
            found: "pid 812 (gunicorn), found listening on :8080".into(),
            shares_cgroup_with_loadlab: false,
        })
    }
    fn limits(&self) -> Option<TargetLimits> {
        Some(TargetLimits {
            cpus: 2.0,
            cpus_from: "affinity: 2 CPUs".into(),
            nofile_soft: Some(1024),
        })
    }
    fn cgroup_limits(&self) -> Option<CgroupLimits> {
        None
    }
    fn sample(&mut self) -> SourceSample {
        let n = self.samples.fetch_add(1, Ordering::SeqCst) + 1;
        SourceSample {
            process: Some(ProcessSample {
                processes: 1,
                cpu_user_s: n as f64,
                ..ProcessSample::default()
            }),
            kernel: KernelSample {
                listen_overflows: n,
                ..KernelSample::default()
            },
            cgroup: None,
            age: Duration::ZERO,
        }
    }
}

fn probe(c: &Coordinator, name: &str, token: &str) -> (ProbeOptions, Arc<AtomicU64>) {
    let samples = Arc::new(AtomicU64::new(0));
    let opts = ProbeOptions {
        coordinator: c.local_addr().to_string(),
        token: token.into(),
        name: name.into(),
        host: "web-1".into(),
        tls_ca: None,
        tls_domain: None,
        version: loadlab_fleet::version(),
        wait: Duration::from_secs(5),
        log: false,
        source: Box::new(Fake {
            samples: samples.clone(),
        }),
    };
    (opts, samples)
}

#[test]
fn the_probe_reaches_the_labs_probe_source_and_leaves_on_goodbye() {
    let c = coordinator(0, 1, Duration::from_secs(10)).unwrap();
    assert!(
        !c.drives_load(),
        "no agents: the load runs on the coordinator"
    );
    let (opts, taken) = probe(&c, "web-1", TOKEN);
    let p = std::thread::spawn(move || run_probe(opts));
    c.wait_for_agents(&CancellationToken::new()).unwrap();
    assert!(c.probe().unwrap().starts_with("web-1 (127.0.0.1:"));
    let mut source = c.probe_source().expect("a probe source");
    let info = source.info().unwrap();
    assert_eq!(
        info.found,
        "pid 812 (gunicorn), found listening on :8080, on host web-1 via loadlab probe"
    );
    assert_eq!(info.pid, Some(812));
    assert_eq!(source.limits().unwrap().cpus, 2.0);
    assert_eq!(source.lost(), None);
    // The newest sample, aged by when it was taken (one a second: less than about 1 s).
    let first = source.sample();
    assert!(first.age < Duration::from_millis(1500), "{:?}", first.age);
    let n = first.process.unwrap().cpu_user_s;
    assert!(n >= 1.0);
    assert_eq!(first.kernel.listen_overflows as f64, n);
    std::thread::sleep(Duration::from_millis(2200));
    let later = source.sample();
    assert!(
        later.process.unwrap().cpu_user_s >= n + 1.0,
        "a sample a second"
    );
    assert!(taken.load(Ordering::SeqCst) >= 3);
    let t = Instant::now();
    c.finish("the run is over");
    assert_eq!(p.join().unwrap().unwrap(), "the run is over");
    assert!(t.elapsed() < Duration::from_secs(2), "{:?}", t.elapsed());
    // A source made after the session ended is lost at once.
    let gone = c.probe_source().unwrap();
    assert!(gone.lost().is_some());
}

#[test]
fn a_second_probe_old_versions_and_unwanted_probes_and_agents_are_refused_by_name() {
    let c = coordinator(0, 1, Duration::from_secs(10)).unwrap();
    let (opts, _) = probe(&c, "first", TOKEN);
    let first = std::thread::spawn(move || run_probe(opts));
    c.wait_for_agents(&CancellationToken::new()).unwrap();
    let (opts, _) = probe(&c, "second", TOKEN);
    let err = run_probe(opts).expect_err("one probe too many");
    assert!(
        matches!(
            &err,
            ProbeError::Refused {
                code: tonic::Code::ResourceExhausted,
                ..
            }
        ),
        "{err}"
    );
    let text = err.to_string();
    assert!(
        text.contains("refused this probe: one probe too many")
            && text.contains("remote probe first (127.0.0.1:")
            && text.contains("one remote probe is supported per run"),
        "{text}"
    );
    let (opts, _) = probe(&c, "guess", "wrong");
    let text = run_probe(opts).expect_err("wrong token").to_string();
    assert!(text.contains("wrong or missing token"), "{text}");
    // This run takes no agents.
    let agent = AgentOptions {
        coordinator: c.local_addr().to_string(),
        token: TOKEN.into(),
        name: "gen".into(),
        threads: 1,
        tls_ca: None,
        tls_domain: None,
        version: loadlab_fleet::version(),
        wait: Duration::from_secs(5),
        log: false,
    };
    let text = run_agent(&agent).expect_err("no agents").to_string();
    assert!(text.contains("this run takes no agents"), "{text}");
    // An agent or a probe of protocol 1 (before remote probes) is refused by its version.
    let old = format!("{} (fleet protocol 1)", env!("CARGO_PKG_VERSION"));
    let text = run_agent(&AgentOptions {
        version: old.clone(),
        ..agent
    })
    .expect_err("an old agent")
    .to_string();
    assert!(
        text.contains(&format!(
            "runs loadlab {old}, but this coordinator runs loadlab"
        )) && text.ends_with("run the same version on both"),
        "{text}"
    );
    let (mut opts, _) = probe(&c, "old", TOKEN);
    opts.version = old.clone();
    let text = run_probe(opts).expect_err("an old probe").to_string();
    assert!(
        text.contains(&format!("probe old runs loadlab {old}")),
        "{text}"
    );
    c.finish("done");
    assert_eq!(first.join().unwrap().unwrap(), "done");

    // A coordinator of agents only refuses a probe.
    let agents_only = coordinator(1, 0, Duration::from_secs(10)).unwrap();
    assert!(agents_only.drives_load());
    assert!(agents_only.probe_source().is_none());
    let (opts, _) = probe(&agents_only, "unwanted", TOKEN);
    let text = run_probe(opts).expect_err("no probe wanted").to_string();
    assert!(text.contains("waits for no remote probe"), "{text}");
    // Two probes, or nothing to wait for, are refused when the coordinator starts.
    let two = coordinator(1, 2, Duration::from_secs(1)).err().unwrap();
    assert!(
        two.to_string()
            .contains("one remote probe is supported per run"),
        "{two}"
    );
    assert!(matches!(
        coordinator(0, 0, Duration::from_secs(1)),
        Err(FleetError::NothingToWaitFor)
    ));
}

#[test]
fn a_probe_that_does_not_come_is_named_and_its_source_is_lost() {
    let c = coordinator(0, 1, Duration::from_millis(500)).unwrap();
    let e = c.wait_for_agents(&CancellationToken::new()).unwrap_err();
    assert!(matches!(e, FleetError::ProbeTimeout { .. }), "{e}");
    assert!(e.to_string().contains("loadlab probe --coordinator"), "{e}");
    let source = c.probe_source().unwrap();
    assert_eq!(
        source.lost().as_deref(),
        Some("the remote probe never joined")
    );
}
