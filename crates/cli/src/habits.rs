//! Other tools' habits never pass silently: the flags of wrk, hey, oha, vegeta, ab, ghz and
//! k6 ([`crate::peers`]) typed to loadlab are refused with what to type instead, or warned
//! about, never run with another meaning unsaid.
//!
//! Two places:
//! - [`scan`], before clap parses: the flags valid here that mean something else in a peer,
//!   when the value has the peer's shape (the rules below), and one-dash long flags
//!   (vegeta's `-rate 100`, hey's `-h2`), which clap would read as a cluster of short flags
//!   (`-r ate`, `-h` and its help).
//! - [`clap_error`], when clap refuses an argument: the table's line for the offending flag
//!   replaces clap's guess ("a similar argument exists: '--token-file'").
//!
//! The rules of [`scan`] (each keeps to the peer's shape, so that no argument loadlab
//! users type is refused):
//! - `-h2` (hey's HTTP/2), and any one-dash word that is a peer's flag or a long flag of
//!   loadlab's (`-rate`, `-duration`, `-connections`): refused.
//! - `-t VALUE` with a unit (`-t 20s`: oha's and ghz's timeout): refused. `-t N` above the
//!   CPUs loadlab may run on (hey's `-t 20`, seconds; ab's `-t 30`, a time limit): a
//!   warning, and the run goes on with N threads; `--threads N` says threads without it.
//! - `-q NUMBER` in run, grpc and knee (hey's and oha's rate; loadlab's `-q` is quiet and
//!   takes no value): refused.
//! - `--json URL` (oha's `--json` takes no value; loadlab's takes the path): refused.
//! - `knee -m VALUE` without `--call` (hey's and oha's method; knee's `-m` is gRPC
//!   metadata): refused.
//! - `grpc -c N` without `--concurrency` (ghz's `-c` is the calls in flight): a warning.
//!   `grpc --cpus N`, one CPU and no `--threads` (ghz's `--cpus` is a count): a warning.
//! - `run -H 'Connection: close'` without `--keep-alive` (wrk's way to close): a warning
//!   naming `--keep-alive off`.
//! - `-d 10`, a duration without its unit (hey's and oha's body, or seconds?), is refused by
//!   the duration's own parser (`args::parse_duration_flag`), with both readings.

use std::process::ExitCode;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::CommandFactory;

use crate::args::Cli;
use crate::peers;

/// What [`scan`] found.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Findings {
    /// Each a reason to refuse the command line (exit 2) before parsing it.
    pub(crate) refusals: Vec<String>,
    /// Each printed on stderr as a warning; the command goes on.
    pub(crate) warnings: Vec<String>,
}

/// One option as typed.
#[derive(Debug)]
struct Typed {
    /// The clap argument's id (`threads`, `quiet`).
    id: String,
    /// As typed: `-t`, `--threads`.
    spelling: String,
    /// Its value, for an option that takes one (and got it).
    value: Option<String>,
    /// Where the option's own token is in the arguments after the subcommand.
    at: usize,
}

/// The subcommand's name (the first argument that is no flag), and where it is.
fn subcommand(argv: &[String]) -> Option<(usize, &str)> {
    argv.iter()
        .enumerate()
        .skip(1)
        .find(|(_, a)| !a.starts_with('-'))
        .map(|(i, a)| (i, a.as_str()))
}

/// A number as a shell user types one: `100`, `2.5`.
fn is_number(s: &str) -> bool {
    !s.is_empty() && s.parse::<f64>().is_ok_and(f64::is_finite)
}

/// Walks `args` (the arguments after the subcommand) as clap will, recording each option
/// of `cmd` and the one-dash long words that are refused outright.
fn walk(cmd: &clap::Command, command: &str, args: &[String], found: &mut Findings) -> Vec<Typed> {
    let by_long = |name: &str| {
        cmd.get_arguments().find(|a| {
            a.get_long() == Some(name) || a.get_all_aliases().is_some_and(|al| al.contains(&name))
        })
    };
    let by_short = |c: char| {
        cmd.get_arguments().find(|a| {
            a.get_short() == Some(c) || a.get_all_short_aliases().is_some_and(|al| al.contains(&c))
        })
    };
    let mut typed = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let tok = &args[i];
        if tok == "--" {
            break;
        }
        if let Some(long) = tok.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_string())),
                None => (long, None),
            };
            if let Some(arg) = by_long(name) {
                let value = if arg.get_action().takes_values() && inline.is_none() {
                    i += 1;
                    args.get(i).cloned()
                } else {
                    inline
                };
                typed.push(Typed {
                    id: arg.get_id().to_string(),
                    spelling: format!("--{name}"),
                    value,
                    at: i,
                });
            }
        } else if tok.len() > 1 && tok.starts_with('-') && !is_number(tok) {
            let word = tok[1..].split('=').next().unwrap_or_default();
            let peer_rows = peers::lookup(command, &format!("-{word}"));
            let one_dash = peers::one_dash_long(&format!("-{word}"));
            if one_dash && !peer_rows.is_empty() {
                found.refusals.extend(peers::explain(&peer_rows, tok));
            } else if word.chars().count() >= 3 && word != "help" && by_long(word).is_some() {
                found.refusals.push(format!(
                    "`-{word}` has one dash (vegeta's and hey's style): loadlab's long flags take two, `--{word}`"
                ));
            } else {
                // A cluster of short flags: `-kq`, `-c64`, `-t 4`.
                let at = i;
                for (n, c) in word.char_indices() {
                    let Some(arg) = by_short(c) else { break };
                    let takes = arg.get_action().takes_values();
                    let value = if !takes {
                        None
                    } else if n + c.len_utf8() < tok.len() - 1 {
                        let rest = &tok[1 + n + c.len_utf8()..];
                        Some(rest.strip_prefix('=').unwrap_or(rest).to_string())
                    } else {
                        i += 1;
                        args.get(i).cloned()
                    };
                    typed.push(Typed {
                        id: arg.get_id().to_string(),
                        spelling: format!("-{c}"),
                        value,
                        at,
                    });
                    if takes {
                        break;
                    }
                }
            }
        }
        i += 1;
    }
    typed
}

/// The habits in `argv` (the whole command line, program name first) that must not pass
/// silently; `cores` is how many CPUs loadlab may run on.
pub(crate) fn scan(argv: &[String], cores: usize) -> Findings {
    let mut found = Findings::default();
    let mut cli = Cli::command();
    cli.build();
    let Some((at, command)) = subcommand(argv) else {
        // `loadlab -h2`: no subcommand, only the table's one-dash flags.
        for tok in argv.iter().skip(1) {
            let rows = peers::lookup("run", tok);
            if peers::one_dash_long(tok) && !rows.is_empty() {
                found.refusals.extend(peers::explain(&rows, tok));
            }
        }
        return found;
    };
    // `serve`'s arguments are the server's own.
    let Some(cmd) = cli.find_subcommand(command).filter(|_| command != "serve") else {
        return found;
    };
    let args = &argv[at + 1..];
    let typed = walk(cmd, command, args, &mut found);
    let given = |id: &str| typed.iter().any(|t| t.id == id);
    for t in &typed {
        let value = t.value.as_deref().unwrap_or_default();
        match (t.id.as_str(), t.spelling.as_str()) {
            ("threads", "-t") => threads(value, cores, &mut found),
            ("quiet", "-q") if matches!(command, "run" | "grpc" | "knee") => {
                if let Some(n) = args.get(t.at + 1).filter(|n| is_number(n)) {
                    found.refusals.push(format!(
                        "`-q {n}` is hey's rate per worker or oha's total rate: here `-q` is quiet and \
                         takes no value; use `--rate {n}` (oha), or `--rate` = hey's `-q` × `-c` \
                         (loadlab's rate is the total)"
                    ));
                }
            }
            ("json", _) if value.contains("://") => found.refusals.push(format!(
                "`{} {value}`: oha's `--json` (print JSON) is `--json -` here: loadlab's `--json` \
                 takes the path to write to (`-`: standard output)",
                t.spelling
            )),
            ("metadata", "-m") if command == "knee" && !given("call") => {
                found.refusals.push(format!(
                    "`-m {value}` is hey's and oha's method: use `-X {value}` (in `loadlab knee`, \
                     `-m` is gRPC metadata, with --call)"
                ));
            }
            ("connections", "-c") if command == "grpc" && !given("concurrency") => {
                found.warnings.push(format!(
                    "`-c {value}` is {value} HTTP/2 connections in `loadlab grpc`; ghz's `-c` (calls in \
                     flight) is `--concurrency {value}`. Give `--concurrency` to say which you mean"
                ));
            }
            ("cpus", _)
                if command == "grpc" && !given("threads") && value.parse::<usize>().is_ok() =>
            {
                found.warnings.push(format!(
                    "`--cpus {value}` pins every worker thread to CPU {value}; ghz's `--cpus {value}` \
                     (how many CPUs) is `-t {value}`. Give `--threads` to say how many workers share it"
                ));
            }
            ("headers", _)
                if command == "run"
                    && !given("keep_alive")
                    && value.split_once(':').is_some_and(|(k, v)| {
                        k.trim().eq_ignore_ascii_case("connection")
                            && v.trim().eq_ignore_ascii_case("close")
                    }) =>
            {
                found.warnings.push(
                    "`-H 'Connection: close'` (wrk's way not to reuse connections) makes the server \
                     close each one; say it to loadlab with `--keep-alive off` (`--close-by client` \
                     to close from loadlab, as ab does)"
                        .into(),
                );
            }
            _ => {}
        }
    }
    found
}

/// `-t VALUE`: worker threads here; a timeout (hey, oha, ghz) or a time limit (ab) there.
fn threads(value: &str, cores: usize, found: &mut Findings) {
    if let Ok(n) = value.parse::<usize>() {
        if n > cores {
            found.warnings.push(format!(
                "`-t {n}` is {n} worker threads, more than the {cores} CPU{} loadlab may run on: \
                 hey's `-t {n}` (a timeout in seconds) is `--timeout {n}s`, ab's (a time limit) \
                 is `-d {n}s`. `--threads {n}` says threads without this warning",
                if cores == 1 { "" } else { "s" }
            ));
        }
    } else if value.starts_with(|c: char| c.is_ascii_digit())
        && loadlab_engine::config::parse_duration(value).is_ok()
    {
        found.refusals.push(format!(
            "`-t {value}` looks like oha's or ghz's timeout: `-t` is worker threads here; use \
             `--timeout {value}`"
        ));
    }
}

/// Prints clap's refusal of `argv` with the table's line for the flag it names in place of
/// clap's own tip (help and version go out as clap writes them); clap's exit status.
pub(crate) fn clap_error(err: &clap::Error, argv: &[String]) -> ExitCode {
    let code = ExitCode::from(err.exit_code() as u8);
    let tips = if err.use_stderr() {
        tips(err, argv)
    } else {
        Vec::new()
    };
    if tips.is_empty() {
        let _ = err.print();
        return code;
    }
    eprint!("{}", with_tips(&err.render().to_string(), &tips));
    code
}

/// clap's message, its own tips replaced by `tips`.
fn with_tips(text: &str, tips: &[String]) -> String {
    let mut lines = text.lines();
    let mut out = format!("{}\n\n", lines.next().unwrap_or_default());
    for t in tips {
        out.push_str(&format!("  tip: {t}\n"));
    }
    let rest: Vec<&str> = lines
        .filter(|l| !l.trim_start().starts_with("tip:"))
        .collect();
    let mut blank = true;
    out.push('\n');
    for l in rest {
        if l.trim().is_empty() {
            if !blank {
                out.push('\n');
            }
            blank = true;
        } else {
            out.push_str(l);
            out.push('\n');
            blank = false;
        }
    }
    out
}

/// The table's lines for the flag clap refused.
fn tips(err: &clap::Error, argv: &[String]) -> Vec<String> {
    let command = subcommand(argv).map_or("run", |(_, c)| c);
    let Some(ContextValue::String(arg)) = err.get(ContextKind::InvalidArg) else {
        return Vec::new();
    };
    if err.kind() == ErrorKind::UnknownArgument {
        return peers::explain(&peers::lookup(command, arg), arg);
    }
    // A value refused: the row of the spelling typed, where loadlab's message does not
    // already say it (`-d 10`: the duration's parser gives both readings).
    let said = err.to_string();
    let flag = arg.split_whitespace().next().unwrap_or_default();
    let mut cli = Cli::command();
    cli.build();
    let Some(cmd) = cli.find_subcommand(command) else {
        return Vec::new();
    };
    let Some(a) = cmd
        .get_arguments()
        .find(|a| a.get_long().is_some_and(|l| format!("--{l}") == flag))
    else {
        return Vec::new();
    };
    let mut spellings: Vec<String> = a.get_long().map(|l| format!("--{l}")).into_iter().collect();
    spellings.extend(a.get_short().map(|c| format!("-{c}")));
    spellings.extend(
        a.get_all_short_aliases()
            .unwrap_or_default()
            .iter()
            .map(|c| format!("-{c}")),
    );
    spellings.extend(
        a.get_all_aliases()
            .unwrap_or_default()
            .iter()
            .map(|l| format!("--{l}")),
    );
    let typed: Vec<&String> = argv
        .iter()
        .take_while(|t| *t != "--")
        .filter(|t| {
            spellings
                .iter()
                .any(|s| *t == s || t.starts_with(&format!("{s}=")))
        })
        .collect();
    let mut out = Vec::new();
    for t in typed {
        let rows: Vec<&peers::Habit> = peers::lookup(command, t)
            .into_iter()
            .filter(|h| !first_flag(h.here).is_some_and(|f| said.contains(&format!("`{f}"))))
            .collect();
        for line in peers::explain(&rows, t) {
            if !out.contains(&line) {
                out.push(line);
            }
        }
    }
    out
}

/// The first flag a row's `here` names (`--body` of "use `--body 'text'`").
fn first_flag(here: &str) -> Option<&str> {
    here.split('`')
        .skip(1)
        .step_by(2)
        .find(|s| s.starts_with('-'))
        .and_then(|s| s.split_whitespace().next())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scan_of(args: &[&str], cores: usize) -> Findings {
        let argv: Vec<String> = std::iter::once("loadlab")
            .chain(args.iter().copied())
            .map(String::from)
            .collect();
        scan(&argv, cores)
    }

    fn refused(args: &[&str]) -> String {
        let f = scan_of(args, 4);
        assert!(!f.refusals.is_empty(), "{args:?} not refused");
        f.refusals.join("\n")
    }

    const URL: &str = "http://127.0.0.1:1/";

    #[test]
    fn loadlab_arguments_pass() {
        for args in [
            &["run", URL, "-d", "10s", "-t", "4", "-c", "64", "-q"][..],
            &[
                "run", URL, "-t4", "-d10s", "-kq", "-H", "X: -d", "-H", "-h2",
            ],
            &["run", URL, "--rate", "-5", "--body", "-h2", "--", "-h2"],
            &["run", "-h"],
            &["run", "--help"],
            &["run", URL, "-help"],
            &["run", URL, "-H", "Connection: close", "--keep-alive", "off"],
            &[
                "grpc",
                "127.0.0.1:1",
                "-c",
                "8",
                "--concurrency",
                "64",
                "-t",
                "2",
                "--cpus",
                "1",
            ],
            &["grpc", "127.0.0.1:1", "--cpus", "0-1"],
            &["knee", URL, "--call", "a.B/C", "--proto", "p", "-m", "k: v"],
            &["lab", "plan.toml", "-q"],
            &["serve", "scenario", "-h2", "-t", "20s"],
        ] {
            assert_eq!(scan_of(args, 4), Findings::default(), "{args:?}");
        }
    }

    #[test]
    fn peer_shapes_are_refused_with_what_to_type() {
        assert_eq!(
            refused(&["run", URL, "-h2"]),
            "`-h2` is hey's HTTP/2 flag: use `--http2`"
        );
        assert!(refused(&["-h2"]).contains("--http2"));
        assert!(refused(&["run", URL, "-rate", "100"]).contains("use `--rate 100/s`"));
        assert!(refused(&["run", URL, "-rate=100"]).contains("`-rate` is vegeta's rate"));
        assert!(refused(&["run", URL, "-disable-keepalive"]).contains("--keep-alive off"));
        assert!(refused(&["run", URL, "-connections", "5"]).contains("`--connections`"));
        assert!(refused(&["knee", URL, "-out", "x"]).contains("`--out`"));
        assert!(refused(&["run", URL, "-t", "20s"]).contains("use `--timeout 20s`"));
        assert!(refused(&["grpc", "h:1", "-t", "500ms"]).contains("--timeout 500ms"));
        assert!(refused(&["run", URL, "-q", "100"]).contains("`--rate 100`"));
        assert!(refused(&["run", "-kq", "2.5", URL]).contains("`-q 2.5`"));
        assert!(refused(&["run", "--json", URL]).contains("`--json -`"));
        assert!(refused(&["knee", URL, "-m", "POST"]).contains("use `-X POST`"));
    }

    #[test]
    fn clashes_in_a_peers_shape_are_warned_about() {
        let w = scan_of(&["run", URL, "-t", "20"], 4);
        assert!(w.refusals.is_empty());
        assert!(w.warnings[0].contains("`--timeout 20s`"), "{w:?}");
        assert!(w.warnings[0].contains("more than the 4 CPUs"), "{w:?}");
        // At or below the CPUs, or spelled out, threads.
        assert_eq!(scan_of(&["run", URL, "-t", "4"], 4), Findings::default());
        assert_eq!(
            scan_of(&["run", URL, "--threads", "20"], 4),
            Findings::default()
        );
        let c = scan_of(&["grpc", "h:1", "-c", "50"], 4);
        assert!(c.warnings[0].contains("`--concurrency 50`"), "{c:?}");
        let cpus = scan_of(&["grpc", "h:1", "--cpus", "4"], 4);
        assert!(cpus.warnings[0].contains("`-t 4`"), "{cpus:?}");
        let close = scan_of(&["run", URL, "-H", "connection:close"], 4);
        assert!(close.warnings[0].contains("--keep-alive off"), "{close:?}");
    }

    #[test]
    fn clap_tips_are_replaced_by_the_tables() {
        let text = "error: unexpected argument '--no-tui' found\n\n  tip: a similar argument exists: '--token-file'\n\nUsage: loadlab run [OPTIONS] [URL]\n\nFor more information, try '--help'.\n";
        let out = with_tips(
            text,
            &["`--no-tui` is oha's plain output: nothing to do".into()],
        );
        assert_eq!(
            out,
            "error: unexpected argument '--no-tui' found\n\n  tip: `--no-tui` is oha's plain output: nothing to do\n\nUsage: loadlab run [OPTIONS] [URL]\n\nFor more information, try '--help'.\n"
        );
        assert_eq!(first_flag("use `-X POST`"), Some("-X"));
        assert_eq!(
            first_flag("use templates: `${x}` or `--data`"),
            Some("--data")
        );
        assert_eq!(first_flag("none"), None);
    }
}
