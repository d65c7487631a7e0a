//! Plans that work the first time (issue 35): path placeholders are absolute whatever
//! `--out` and the current directory are.

mod util;

use std::path::Path;
use std::process::{Command, Output};

use util::lab::{fixture, lines, LAB_BOUND};
use util::{loadlab_bin, output_within, temp_path};

/// `loadlab lab ARGS...` run in `cwd`, killed (and the test failed) past the lab bound.
fn lab_in(cwd: &Path, args: &[&str]) -> Output {
    output_within(
        Command::new(loadlab_bin())
            .current_dir(cwd)
            .arg("lab")
            .args(args),
        LAB_BOUND,
    )
    .0
}

fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

/// One short step against the first target: a plan runs in a second or two.
const SCENARIO_AND_LOAD: &str = r#"
[[scenario]]
name = "s"
url = "http://127.0.0.1:{port}/"
timeout = "1s"

[load]
steps = [20]
step_duration = "1s"
connections = 2
threads = 1
"#;

/// The fixture server as target `NAME`, started by `sh -c` so that it can check something
/// first (`CHECK`, a shell command: the target exits 8 if it fails).
fn checked_target(name: &str, check: &str, extra: &str) -> String {
    format!(
        r#"
[[target]]
name = "{name}"
shell = true
command = ["{check} || exit 8; exec FIXTURE --port {{{name}_port}}"]
ready = {{ http = "http://127.0.0.1:{{{name}_port}}/", status = 200 }}
ready_timeout = "5s"
stop_grace = "1s"
{extra}
"#
    )
}

/// The bug: with `--out b` relative, `{files}` and `{bundle}` were relative, and a target
/// whose `cwd` is elsewhere (nginx: the plan's directory) looked for its files in the wrong
/// place. Here loadlab runs in another directory than the plan's, with `--out rel/b`, and
/// the target in `/`: it checks its paths are absolute and its file is there, and writes
/// what it received.
#[test]
fn a_relative_out_from_another_directory_gives_absolute_paths() {
    let cwd = temp_path("elsewhere");
    std::fs::create_dir_all(cwd.join("plans")).unwrap();
    let check = "for p in '{files}' '{bundle}' '{plan_dir}'; do case $p in /*) ;; *) exit 9;; esac; done; \
                 test -f '{files}/probe.txt' && echo '{files} {bundle} {plan_dir}' > '{bundle}/seen.txt'";
    let plan = format!(
        "name = \"rel\"\n{}{SCENARIO_AND_LOAD}",
        checked_target(
            "fx",
            check,
            "cwd = \"/\"\n[target.files]\n\"probe.txt\" = \"written into {files}\""
        )
    );
    std::fs::write(
        cwd.join("plans/plan.toml"),
        plan.replace("FIXTURE", &fixture()),
    )
    .unwrap();
    // The plan too is named relative to loadlab's directory.
    let out = lab_in(&cwd, &["-q", "plans/plan.toml", "--out", "rel/b"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let bundle = cwd.join("rel/b");
    let configs = lines(&bundle.join("configs.jsonl"));
    assert_eq!(configs.len(), 1, "{configs:?}");
    assert_eq!(configs[0]["status"], "completed", "{configs:?}");
    let seen = std::fs::read_to_string(bundle.join("seen.txt")).unwrap();
    let seen: Vec<&str> = seen.split_whitespace().collect();
    let canon = |p: &Path| std::fs::canonicalize(p).unwrap();
    assert_eq!(
        seen.iter().map(|p| canon(Path::new(p))).collect::<Vec<_>>(),
        [
            canon(&bundle.join("files/default")),
            canon(&bundle),
            canon(&cwd.join("plans"))
        ],
        "{seen:?}"
    );
    assert!(seen.iter().all(|p| p.starts_with('/')), "{seen:?}");
    // Messages still name the bundle as it was given.
    assert!(stderr.contains("bundle rel/b;"), "{stderr}");
}
