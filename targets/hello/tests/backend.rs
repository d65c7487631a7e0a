//! The backend served in-process: its services, the latency model over the wire, the
//! ticker's stream,
//! connection counts, stream limits and graceful shutdown.

use std::sync::Arc;
use std::time::{Duration, Instant};

use loadlab_hello::{Config, Counters, LatencyModel};
use loadlab_target_common::proto::hello::hello_service_client::HelloServiceClient;
use loadlab_target_common::proto::hello::HelloRequest;
use loadlab_target_common::proto::helloworld;
use loadlab_target_common::proto::helloworld::greeter_client::GreeterClient;
use loadlab_target_common::proto::ticker::ticker_client::TickerClient;
use loadlab_target_common::proto::ticker::{Note, SubscribeRequest};
use loadlab_target_common::testing::{ServerThread, WAIT_LIMIT};
use tonic::transport::Channel;

struct Backend {
    server: ServerThread,
    counters: Arc<Counters>,
}

impl Backend {
    fn start(latency: &str, max_concurrent_streams: Option<u32>) -> Self {
        let config = Config {
            latency: latency.parse().unwrap(),
            max_concurrent_streams,
            shutdown_timeout: Duration::from_secs(5),
            tick_every: Duration::from_millis(20),
            chat_delay: Duration::from_millis(20),
            // One worker for every Chat stream: two streams' notes take turns.
            chat_pool: Some(1),
        };
        let counters = Arc::new(Counters::default());
        let shared = Arc::clone(&counters);
        let server = ServerThread::spawn(move |listener, shutdown| {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(loadlab_hello::run(listener, config, shared, shutdown))
        });
        Backend { server, counters }
    }

    async fn channel(&self) -> Channel {
        Channel::from_shared(format!("http://{}", self.server.addr()))
            .unwrap()
            .connect()
            .await
            .expect("connect to backend")
    }
}

fn request(id: &str) -> HelloRequest {
    HelloRequest {
        id: id.into(),
        message: "rustacean loves rust".into(),
    }
}

/// Calls `Say` `n` times at once on `channel`; returns each call's duration and the total.
async fn concurrent_says(channel: &Channel, n: usize) -> (Vec<Duration>, Duration) {
    let start = Instant::now();
    let calls = (0..n).map(|i| {
        let mut client = HelloServiceClient::new(channel.clone());
        tokio::spawn(async move {
            let started = Instant::now();
            client.say(request(&i.to_string())).await.expect("Say");
            started.elapsed()
        })
    });
    let mut durations = Vec::new();
    for call in calls.collect::<Vec<_>>() {
        durations.push(call.await.unwrap());
    }
    (durations, start.elapsed())
}

#[tokio::test(flavor = "multi_thread")]
async fn say_echoes_the_request_after_the_fixed_delay() {
    let backend = Backend::start("fixed:100ms", None);
    let mut client = HelloServiceClient::new(backend.channel().await);
    for id in ["000001", "000002"] {
        let start = Instant::now();
        let response = client.say(request(id)).await.unwrap().into_inner();
        assert!(start.elapsed() >= Duration::from_millis(100));
        assert_eq!(response.id, id);
        assert_eq!(response.message, "hello, rustacean loves rust");
    }
    assert_eq!(backend.counters.snapshot().say_calls, 2);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_subscription_streams_numbered_ticks_on_schedule_until_the_client_goes() {
    let backend = Backend::start("fixed:5ms", None);
    let mut client = TickerClient::new(backend.channel().await);
    let start = Instant::now();
    let mut stream = client
        .subscribe(SubscribeRequest { topic: "t".into() })
        .await
        .unwrap()
        .into_inner();
    for seq in 1..=5u64 {
        let tick = stream.message().await.unwrap().expect("a tick");
        assert_eq!(tick.seq, seq);
        assert!(
            tick.sent_at_us > 1_700_000_000_000_000,
            "{}",
            tick.sent_at_us
        );
    }
    // Five ticks 20 ms apart, the first 20 ms in: no sooner than 100 ms.
    assert!(start.elapsed() >= Duration::from_millis(100));
    let counts = backend.counters.snapshot();
    assert_eq!(counts.subscribe_calls, 1);
    assert!(counts.ticks >= 5, "{counts:?}");
    // The client goes: the server's task ends and stops counting ticks.
    drop(stream);
    drop(client);
    tokio::time::sleep(Duration::from_millis(100)).await;
    let gone = backend.counters.snapshot().ticks;
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(
        backend.counters.snapshot().ticks,
        gone,
        "ticks after the client left"
    );
}

/// One Chat stream of three notes (`seq` stream × 10 + 1, 2, 3): the answers, in order.
async fn chat_three(
    mut client: TickerClient<tonic::transport::Channel>,
    stream: u64,
) -> Vec<(u64, String)> {
    let notes: Vec<Note> = (1..=3u64)
        .map(|seq| Note {
            seq: stream * 10 + seq,
            text: format!("note {seq}"),
            sent_at_us: 0,
        })
        .collect();
    let mut answers = client
        .chat(tokio_stream::iter(notes))
        .await
        .unwrap()
        .into_inner();
    let mut got = Vec::new();
    while let Some(note) = answers.message().await.unwrap() {
        assert!(note.sent_at_us > 1_700_000_000_000_000, "{note:?}");
        got.push((note.seq, note.text));
    }
    got
}

#[tokio::test(flavor = "multi_thread")]
async fn a_chat_answers_each_note_in_order_with_the_pool_shared_by_every_stream() {
    let backend = Backend::start("fixed:5ms", None);
    let client = TickerClient::new(backend.channel().await);
    let start = Instant::now();
    // Two streams of three notes each; one worker of 20 ms for both: six notes in turn.
    let (a, b) = tokio::join!(chat_three(client.clone(), 0), chat_three(client.clone(), 1));
    for (stream, got) in [a, b].into_iter().enumerate() {
        let base = stream as u64 * 10;
        let want: Vec<(u64, String)> = (1..=3u64)
            .map(|seq| (base + seq, format!("note {seq}")))
            .collect();
        assert_eq!(
            got, want,
            "stream {stream}: each note answered once, in order"
        );
    }
    // Six notes through one worker of 20 ms: no sooner than 120 ms.
    assert!(start.elapsed() >= Duration::from_millis(120));
    let counts = backend.counters.snapshot();
    assert_eq!(
        (counts.chat_calls, counts.notes_in, counts.notes_out),
        (2, 6, 6)
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn greeter_says_hello_at_once() {
    let backend = Backend::start("fixed:5s", None);
    let mut client = GreeterClient::new(backend.channel().await);
    let start = Instant::now();
    let reply = client
        .say_hello(helloworld::HelloRequest {
            name: "loadlab".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(reply.message, "Hello loadlab!");
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "Greeter must not use the latency model"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn uniform_delays_stay_inside_their_bounds() {
    let backend = Backend::start("uniform:30ms..90ms", None);
    let channel = backend.channel().await;
    let (durations, _) = concurrent_says(&channel, 12).await;
    for d in durations {
        assert!(
            d >= Duration::from_millis(30),
            "{d:?} below the lower bound"
        );
        // Upper bound plus generous slack for a busy machine.
        assert!(
            d < Duration::from_millis(90) + Duration::from_secs(2),
            "{d:?} far above"
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn connections_are_counted_on_accept_and_close() {
    let backend = Backend::start("fixed:1ms", None);
    let first = backend.channel().await;
    concurrent_says(&first, 10).await;
    assert_eq!(backend.counters.snapshot().accepted_connections, 1);
    let second = backend.channel().await;
    concurrent_says(&second, 1).await;
    let counts = backend.counters.snapshot();
    assert_eq!(
        (counts.accepted_connections, counts.open_connections),
        (2, 2)
    );
    drop((first, second));
    let deadline = Instant::now() + WAIT_LIMIT;
    while backend.counters.snapshot().open_connections > 0 && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(backend.counters.snapshot().open_connections, 0);
}

/// A connection that has made one call, so the server's HTTP/2 settings have arrived: a
/// client that opens streams before it knows the limit gets them refused (`REFUSED_STREAM`).
async fn warm_channel(backend: &Backend) -> Channel {
    let channel = backend.channel().await;
    concurrent_says(&channel, 1).await;
    channel
}

#[tokio::test(flavor = "multi_thread")]
async fn one_stream_per_connection_serializes_a_shared_client() {
    let delay = Duration::from_millis(300);
    let limited = Backend::start("fixed:300ms", Some(1));
    let (_, serialized) = concurrent_says(&warm_channel(&limited).await, 3).await;
    assert!(
        serialized >= delay * 27 / 10,
        "3 calls on 1 stream took {serialized:?}"
    );

    let unlimited = Backend::start("fixed:300ms", None);
    let (_, overlapped) = concurrent_says(&warm_channel(&unlimited).await, 3).await;
    assert!(
        overlapped < delay * 16 / 10,
        "3 multiplexed calls took {overlapped:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn shutdown_lets_in_flight_calls_finish() {
    let Backend { server, .. } = Backend::start("fixed:400ms", None);
    let mut client = HelloServiceClient::new(
        Channel::from_shared(format!("http://{}", server.addr()))
            .unwrap()
            .connect()
            .await
            .unwrap(),
    );
    let call = tokio::spawn(async move { client.say(request("last")).await });
    tokio::time::sleep(Duration::from_millis(100)).await;
    let stopped = tokio::task::spawn_blocking(move || server.stop());
    let response = call.await.unwrap().expect("in-flight call completes");
    assert_eq!(response.into_inner().id, "last");
    assert_eq!(stopped.await.unwrap(), Ok(()));
}

#[test]
fn default_model_is_a_few_ms_to_a_few_hundred() {
    let (lo, hi) = LatencyModel::default().bounds();
    assert_eq!(lo, Duration::ZERO);
    assert_eq!(hi, Duration::from_millis(600));
}
