//! Every plan that ships in `plans/` is read and validated as `loadlab lab` reads it, at its
//! full scale and at `--quick`, with every configuration of its matrix: a plan broken by a
//! change of the plan format fails here in a second, where CI runs only some of them end to
//! end (`.ci/plans`).

use std::path::PathBuf;

use loadlab_lab::Plan;

fn shipped() -> Vec<PathBuf> {
    let dir = PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../plans"));
    let mut plans: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    plans.sort();
    plans
}

#[test]
fn every_shipped_plan_is_valid_at_full_scale_and_at_quick() {
    let plans = shipped();
    // The source experiments' plans at least (a rename here must be a rename there too).
    for name in [
        "backlog-workers",
        "runtimes",
        "io-modes",
        "proxy-pool",
        "proxy-pool-jvm",
        "demo",
    ] {
        assert!(
            plans
                .iter()
                .any(|p| p.file_stem().is_some_and(|s| s == name)),
            "plans/{name}.toml is missing: {plans:?}"
        );
    }
    for path in &plans {
        for quick in [false, true] {
            let plan = Plan::load(path, quick)
                .unwrap_or_else(|e| panic!("{} (quick {quick}): {e}", path.display()));
            let configs = plan.configs();
            assert!(
                !configs.is_empty(),
                "{} (quick {quick}): no configuration",
                path.display()
            );
        }
    }
}
