//! A coordinator that claims another loadlab version, for the distributed tests: a real
//! `loadlab agent` dialing it must be refused with both versions named.
//!
//! `other_version_coordinator --listen ADDR --token-file PATH --version STRING --wait SECS`
//! waits for one agent; after the refusal the wait times out, and it exits 1 with the error.

use std::time::Duration;

use loadlab_engine::CancellationToken;
use loadlab_fleet::{Coordinator, CoordinatorOptions, OnAgentLoss};

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let arg = |name: &str| {
        let i = args
            .iter()
            .position(|a| a == name)
            .unwrap_or_else(|| panic!("{name} is required"));
        args[i + 1].clone()
    };
    let token = std::fs::read_to_string(arg("--token-file")).expect("--token-file");
    let coordinator = Coordinator::start(CoordinatorOptions {
        listen: arg("--listen").parse().expect("--listen ADDR"),
        token: token.trim().to_string(),
        agents: 1,
        probes: 0,
        wait: Duration::from_secs(arg("--wait").parse().expect("--wait SECS")),
        tls: None,
        on_loss: OnAgentLoss::Continue,
        run_stop: CancellationToken::new(),
        log: true,
        version: arg("--version"),
    })
    .expect("the coordinator starts");
    eprintln!("listening on {}", coordinator.local_addr());
    match coordinator.wait_for_agents(&CancellationToken::new()) {
        Ok(_) => {
            eprintln!("an agent of this version joined");
            std::process::exit(0);
        }
        Err(e) => {
            eprintln!("{e}");
            std::process::exit(1);
        }
    }
}
