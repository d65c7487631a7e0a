//! Streaming gRPC calls whose request varies: the message's templates (`${seq}`, a data
//! file's column) rendered for every message sent on a bidirectional or client-streaming
//! call, and for the one request of every server stream opened; a data file read in
//! `unique` order ends the run on its last row.
//!
//! The server: Python's grpcio (Debian's python3-grpcio), which nobody here wrote, serving
//! ticker.Ticker's Subscribe, Chat and Upload (proto/ticker.proto) with generic handlers
//! that decode every request message they get and keep its `seq` and which word its text
//! (or a subscription's topic) was: its own record is the truth.

mod util;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;
use util::server::Server;
use util::{grpc, RunOutput};

/// The data file's words: a request's text (a subscription's topic) is one of them.
const WORDS: [&str; 3] = ["alpha", "beta", "gamma"];

fn ticker_proto() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../proto/ticker.proto").into()
}

/// Python's grpcio on CPU 0 serving Subscribe (two ticks 10 ms apart, then the stream ends
/// with OK), Chat (each note echoed at once) and Upload (a receipt when the client's side
/// ends). Every request message is decoded and kept as `seq` and its word's index in
/// [`WORDS`] (9: none of them); on SIGTERM it writes them to its record file.
struct Recording {
    server: Server,
    record: PathBuf,
}

/// What the server got: per method, each request's `(seq, word index)` in arrival order.
type Record = BTreeMap<String, Vec<(u64, u64)>>;

impl Recording {
    fn start() -> Recording {
        let py = "import sys, time, grpc, signal, threading\n\
            from concurrent import futures\n\
            words = sys.argv[1].split(',')\n\
            lock = threading.Lock(); seen = []\n\
            def keep(method, b, seq_field, word_field):\n\
            \x20   f = fields(b)\n\
            \x20   word = f.get(word_field, b'').decode()\n\
            \x20   with lock: seen.append((method, f.get(seq_field, 0), words.index(word) if word in words else 9))\n\
            def subscribe(request, context):\n\
            \x20   # A topic `word-seq`: its word, and its seq after the dash.\n\
            \x20   topic = fields(request).get(1, b'').decode()\n\
            \x20   word, _, seq = topic.partition('-')\n\
            \x20   with lock: seen.append(('Subscribe', int(seq) if seq.isdigit() else 0, words.index(word) if word in words else 9))\n\
            \x20   for n in (1, 2):\n\
            \x20       time.sleep(0.01)\n\
            \x20       yield b'\\x08' + enc(n)\n\
            def chat(notes, context):\n\
            \x20   for note in notes:\n\
            \x20       keep('Chat', note, 1, 2)\n\
            \x20       yield note\n\
            def upload(notes, context):\n\
            \x20   n = 0\n\
            \x20   for note in notes:\n\
            \x20       keep('Upload', note, 1, 2); n += 1\n\
            \x20   return b'\\x08' + enc(n)\n\
            rpc = grpc.method_handlers_generic_handler('ticker.Ticker', {\n\
            \x20   'Subscribe': grpc.unary_stream_rpc_method_handler(subscribe),\n\
            \x20   'Chat': grpc.stream_stream_rpc_method_handler(chat),\n\
            \x20   'Upload': grpc.stream_unary_rpc_method_handler(upload)})\n\
            server = grpc.server(futures.ThreadPoolExecutor(max_workers=16))\n\
            server.add_generic_rpc_handlers((rpc,))\n\
            port = server.add_insecure_port('127.0.0.1:0')\n\
            server.start()\n\
            def bye(*_):\n\
            \x20   with lock: text = '\\n'.join(f'{m} {s} {w}' for m, s, w in seen)\n\
            \x20   with open(sys.argv[2], 'w') as f: f.write(text)\n\
            \x20   import os; os._exit(0)\n\
            signal.signal(signal.SIGTERM, bye)\n\
            print('port', port, flush=True)\n\
            while True: time.sleep(1)\n";
        let record = util::temp_path("stream-data-record");
        let mut cmd = util::server::python_with_proto(py);
        cmd.arg(WORDS.join(",")).arg(&record);
        let server = Server::spawn(cmd, |l| l.strip_prefix("port ")?.parse().ok());
        Recording { server, record }
    }

    /// Stops the server (SIGTERM) and reads what it got.
    fn record(mut self) -> Record {
        let pid = self.server.pid().to_string();
        let ok = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(ok.success(), "kill -TERM {pid}");
        let _ = self.server.child.wait();
        let text = std::fs::read_to_string(&self.record).unwrap_or_else(|e| {
            panic!(
                "{}: {e} (the server wrote no record)",
                self.record.display()
            )
        });
        let mut got = Record::new();
        for line in text.lines() {
            let mut w = line.split(' ');
            let (m, s, k) = (w.next().unwrap(), w.next().unwrap(), w.next().unwrap());
            got.entry(m.to_string())
                .or_default()
                .push((s.parse().unwrap(), k.parse().unwrap()));
        }
        got
    }
}

/// A data file of one column, `word`, with `rows` rows cycling through [`WORDS`].
fn words_csv(rows: usize) -> PathBuf {
    let path = util::temp_path("stream-words.csv");
    let mut text = String::from("word\n");
    for i in 0..rows {
        text.push_str(WORDS[i % WORDS.len()]);
        text.push('\n');
    }
    std::fs::write(&path, text).unwrap();
    path
}

/// `loadlab grpc` on ticker.Ticker/`method` with `message` and the data file `data`
/// (`order`), no warm-up (the server's record then holds exactly what was measured), then
/// `rest`.
fn run(port: u16, method: &str, message: &str, data: &Path, rest: &[&str]) -> RunOutput {
    let addr = format!("127.0.0.1:{port}");
    let proto = ticker_proto();
    let call = format!("ticker.Ticker/{method}");
    let data = data.display().to_string();
    let mut args = vec![
        addr.as_str(),
        "--proto",
        &proto,
        "--call",
        &call,
        "-D",
        message,
        "--data",
        &data,
        "-c",
        "1",
        "--warmup",
        "0s",
        "--threads",
        "1",
        "--cpus",
        "1",
    ];
    args.extend_from_slice(rest);
    grpc(&args)
}

fn u(j: &Value, key: &str) -> u64 {
    j[key]
        .as_u64()
        .unwrap_or_else(|| panic!("{key} missing: {j}"))
}

/// The `seq`s of `got`, sorted, and how many requests carried each word.
fn seqs_and_words(got: &[(u64, u64)]) -> (Vec<u64>, [u64; 3]) {
    let mut seqs: Vec<u64> = got.iter().map(|(s, _)| *s).collect();
    seqs.sort_unstable();
    let mut words = [0; 3];
    for (_, w) in got {
        assert!(
            *w < 3,
            "a request carried none of the data file's words: {got:?}"
        );
        words[*w as usize] += 1;
    }
    (seqs, words)
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn every_message_of_a_bidirectional_stream_is_rendered_from_its_own_seq_and_row() {
    let server = Recording::start();
    let data = words_csv(3);
    let r = run(
        server.server.port,
        "Chat",
        r#"{"seq":"${seq}","text":"${word}"}"#,
        &data,
        &["--concurrency", "4", "--rate", "200", "-d", "1s"],
    );
    let got = server.record();
    assert_eq!(r.code(), Some(0), "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["protocol"], "grpc_bidi_stream", "{j}");
    assert_eq!(u(j, "errors_total"), 0, "{}", r.stdout);
    let n = u(j, "successful");
    assert_eq!(n, 200, "{}", r.stdout);
    // Each of the 200 notes its own ${seq} (1 to 200, none twice), and the rows taken in
    // turn: the three words a third each.
    let (seqs, words) = seqs_and_words(&got["Chat"]);
    assert_eq!(seqs, (1..=n).collect::<Vec<_>>(), "the notes' seqs");
    assert!(
        words.iter().all(|w| w.abs_diff(n / 3) <= 1),
        "words {words:?} of {n} notes"
    );
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn a_client_streaming_run_in_unique_order_sends_each_row_once_and_ends_on_the_last() {
    let server = Recording::start();
    // 12 rows, 4 per call: three calls, each row once, then the run ends (not at 10 s).
    let data = words_csv(12);
    let r = run(
        server.server.port,
        "Upload",
        r#"{"seq":"${seq}","text":"${word}"}"#,
        &data,
        &[
            "--messages-per-call",
            "4",
            "--data-order",
            "unique",
            "--concurrency",
            "2",
            "--rate",
            "100",
            "-d",
            "10s",
        ],
    );
    let got = server.record();
    assert_eq!(r.code(), Some(0), "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["protocol"], "grpc_client_stream", "{j}");
    assert_eq!(u(j, "errors_total"), 0, "{}", r.stdout);
    assert_eq!(u(j, "successful"), 12, "{}", r.stdout);
    let (seqs, words) = seqs_and_words(&got["Upload"]);
    assert_eq!(seqs, (1..=12).collect::<Vec<_>>(), "the notes' seqs");
    assert_eq!(words, [4, 4, 4], "each row once");
    assert!(
        j["duration_s"].as_f64().unwrap() < 5.0,
        "the run went on after its last row: {j}"
    );
}

#[test]
#[ignore = "needs Python's grpcio (./test.sh installs python3-grpcio)"]
fn each_server_stream_opened_sends_its_own_rendered_request() {
    let server = Recording::start();
    let data = words_csv(3);
    // Two streams held for 1 s; the server ends each after two ticks, so streams are opened
    // again and again, each with the request rendered for it.
    let r = run(
        server.server.port,
        "Subscribe",
        r#"{"topic":"${word}-${seq}"}"#,
        &data,
        &["--concurrency", "2", "-d", "1s", "--timeout", "2s"],
    );
    let got = server.record();
    assert_eq!(r.code(), Some(0), "{}\n{}", r.stdout, r.stderr);
    let j = r.json();
    assert_eq!(j["protocol"], "grpc_server_stream", "{j}");
    assert_eq!(u(j, "errors_total"), 0, "{}", r.stdout);
    let opened = &got["Subscribe"];
    assert!(opened.len() >= 10, "streams opened: {opened:?}");
    // Every stream's request rendered when it opened: ${seq} 1, 2, 3… over the streams
    // opened (none sent twice, none skipped), each with a word of the file.
    let (seqs, words) = seqs_and_words(opened);
    assert_eq!(
        seqs,
        (1..=seqs.len() as u64).collect::<Vec<_>>(),
        "topics' seqs"
    );
    assert!(
        words.iter().filter(|w| **w > 0).count() >= 2,
        "words {words:?}"
    );
}
