//! Rendering allocates nothing once the output buffer has room: a global allocator
//! counts the allocations this thread makes while it renders 10,000 requests.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use loadlab_template::{Cursor, Data, Draw, Generator, Order, Origin, Slot, Template};

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
    let data = Data::from_rows(
        "users.csv",
        vec!["id".into(), "name".into()],
        (0..100)
            .map(|i| vec![i.to_string(), format!("user é #{i}")])
            .collect(),
    )
    .unwrap();
    let origin = Origin::flag("test");
    let compile = |text: &str, slot| Template::compile(text, slot, &origin, Some(&data)).unwrap();
    let url = compile(
        "/users/${id}/${name}?seq=${seq}&r=${rand:-5-5}&p=${pick:a|b,c}",
        Slot::Url,
    );
    let header = compile("${uuid} ${now} ${now_ms}", Slot::Header);
    let body = compile(
        "{\"seq\": ${seq}, \"name\": \"${name}\", \"s\": \"${randstr:40}\", \"h\": \"${hex:33}\"}",
        Slot::Body,
    );
    let templates = [&url, &header, &body];
    let room: usize = templates.iter().map(|t| t.max_len(Some(&data))).sum();
    let mut out = Vec::with_capacity(room);
    let cursor = Cursor::new();
    let mut gen = Generator::new(1, 0);
    // A first rendering outside the count: lazily initialised state (the clock's vDSO
    // lookup, thread-locals) is not a per-request cost.
    url.render(&Draw::new(0, Some(data.row(0))), &mut gen, &mut out);
    out.clear();

    let mut bytes = 0;
    let allocations = allocations_during(|| {
        for _ in 0..10_000 {
            let row = data
                .pick(Order::Sequential, &cursor, &mut gen)
                .map(|i| data.row(i));
            let draw = Draw::new(cursor.next_seq(), row);
            out.clear();
            for t in templates {
                t.render(&draw, &mut gen, &mut out);
            }
            bytes += out.len();
        }
    });
    assert_eq!(
        allocations, 0,
        "allocations while rendering 10,000 requests"
    );
    assert!(bytes > 10_000 * 150, "{bytes} bytes rendered");
    assert_eq!(cursor.seqs_taken(), 10_000);
    // The counter counts: growing the buffer is an allocation.
    let mut small = Vec::new();
    let grew =
        allocations_during(|| body.render(&Draw::new(1, Some(data.row(0))), &mut gen, &mut small));
    assert!(grew > 0);
}
