//! Rendering a templated message allocates nothing once the buffers have room: a global
//! allocator counts the allocations this thread makes while it renders 10,000 frames.

mod util;

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::path::Path;

use loadlab_grpc::{CompiledMessage, GrpcCall, UnaryCall};
use loadlab_template::{Cursor, Data, Draw, Generator, Order};

struct Counting;

thread_local! {
    /// Counting on this thread (the test harness's other threads allocate as they like).
    static COUNTING: Cell<bool> = const { Cell::new(false) };
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn note() {
    // `try_with`: the allocator can run while thread-locals are torn down.
    let _ = COUNTING.try_with(|on| {
        if on.get() {
            let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        }
    });
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note();
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note();
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

fn allocations_during(f: impl FnOnce()) -> u64 {
    ALLOCATIONS.with(|n| n.set(0));
    COUNTING.with(|on| on.set(true));
    f();
    COUNTING.with(|on| on.set(false));
    ALLOCATIONS.with(Cell::get)
}

#[test]
fn rendering_allocates_nothing() {
    let proto = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/proto/kinds.proto");
    let json = r#"{
      "name": "user-${seq}-${name}",
      "scalars": {"s": "${randstr:40}", "i32": "${rand:-5-5}", "i64": "${id}", "u64": "${now_ms}",
        "si64": "${rand:-1000-1000}", "f64": "${seq}", "b": "${pick:true,false}", "d": "${id}",
        "f": "${pick:0.5,1.5}", "colour": "${pick:1,2}", "blob": "AAE="},
      "inner": {"n": "${seq}", "label": "${uuid}", "deep": {"s": "${rand:-9-9}", "t": "${hex:33}"},
        "counts": [1, "${seq}", 3]},
      "tags": ["a", "${pick:b,cc,ddd}"],
      "items": [{"n": 1}, {"n": "${id}", "label": "l"}],
      "wrapped": "${seq}",
      "far": "${name}"
    }"#;
    let call = GrpcCall::resolve(&proto, &[], "kinds.Kinds/Call", json, &[] as &[&str]).unwrap();
    let data = Data::from_rows(
        "users.csv",
        vec!["id".into(), "name".into()],
        (0..100)
            .map(|i| vec![(i * 7919).to_string(), format!("user é #{i}")])
            .collect(),
    )
    .unwrap();
    let message =
        CompiledMessage::compile(call.template.as_ref().unwrap(), Some(&data), "-D").unwrap();
    let mut out = Vec::with_capacity(message.max_frame_len(Some(&data)));
    let mut scratch = Vec::with_capacity(message.max_scratch_len(Some(&data)));
    let cursor = Cursor::new();
    let mut gen = Generator::new(1, 0);
    // A first rendering outside the count: lazily initialised state (the clock's vDSO
    // lookup, thread-locals) is not a per-call cost.
    message.render_frame(
        &Draw::new(0, Some(data.row(0))),
        &mut gen,
        &mut out,
        &mut scratch,
    );

    let mut bytes = 0;
    let mut longest = 0;
    let allocations = allocations_during(|| {
        for _ in 0..10_000 {
            let row = data
                .pick(Order::Sequential, &cursor, &mut gen)
                .map(|i| data.row(i));
            let draw = Draw::new(cursor.next_seq(), row);
            out.clear();
            message.render_frame(&draw, &mut gen, &mut out, &mut scratch);
            bytes += out.len();
            longest = longest.max(out.len());
        }
    });
    assert_eq!(allocations, 0, "allocations while rendering 10,000 frames");
    assert!(bytes > 10_000 * 200, "{bytes} bytes rendered");
    assert!(longest <= message.max_frame_len(Some(&data)));
    // The last frame is a whole request: seq 10,000 and row 9,999 % 100.
    let decoder = UnaryCall::resolve(&proto, &[], "kinds.Kinds/Call", "{}").unwrap();
    let last = decoder.decode_response(&out).unwrap();
    assert_eq!(last["name"], "user-10000-user é #99");
    assert_eq!(last["inner"]["n"], "10000");
    assert_eq!(last["items"][1]["n"], (99 * 7919).to_string());
    assert_eq!(util::unframe(&out).len() + 5, out.len());

    // The counter counts: growing the buffers is an allocation.
    let (mut small, mut tiny) = (Vec::new(), Vec::new());
    let grew = allocations_during(|| {
        message.render_frame(
            &Draw::new(1, Some(data.row(0))),
            &mut gen,
            &mut small,
            &mut tiny,
        );
    });
    assert!(grew > 0);
}
