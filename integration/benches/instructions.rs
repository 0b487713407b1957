//! Each benchmarked variant called N times, for counting instructions with callgrind,
//! which, unlike wall time, does not move with the load on the machine.
//!
//! ```text
//! cargo bench --manifest-path integration/benches/default-features/Cargo.toml --bench instructions --no-run
//!                                               # prints the binary's path
//! valgrind --tool=callgrind --callgrind-out-file=/tmp/cg.out BINARY retry 100000
//! ```
//!
//! Instructions per call = (Ir at N calls - Ir at 0 calls) / N: the runtime's start-up and
//! the warm-up call (which registers statistics and seeds thread-locals) cancel out.
//! `integration/benches/callgrind.sh` does this for every variant and prints a table.
//!
//! Each variant is called as a function item, the way criterion's closures in
//! `overhead.rs` call it and the way a caller's own code calls a function: the compiler
//! may inline the call and build the future in place. (Called through a function
//! pointer, every variant whose future is larger than 128 bytes would also pay two
//! `memcpy` calls of it, 58 instructions here, which the wall-time benchmark does not
//! see.)
//!
//! Run by `cargo bench` (with `--bench` and no variant), it calls every variant a few
//! times and checks their results, so that it cannot rot.

use std::hint::black_box;

mod support;
use support::*;

/// A variant's name, and what makes `n` calls of it after one warm-up call.
type Variant = (&'static str, fn(u64));

/// The variants, in the order `callgrind.sh` reports them.
const VARIANTS: &[Variant] = &[
    ("direct", |n| on_runtime(n, direct)),
    ("retry", |n| on_runtime(n, retried)),
    ("backon", |n| on_runtime(n, backon_call)),
    ("tokio-retry", |n| on_runtime(n, tokio_retry_call)),
    ("tower", |n| on_runtime(n, tower_call)),
    ("once/hand-loop", |n| on_runtime(n, hand_loop_once)),
    ("once/retry", |n| on_runtime(n, retry_once)),
    ("once/backon", |n| on_runtime(n, backon_once)),
    ("once/tokio-retry", |n| on_runtime(n, tokio_retry_once)),
    ("once/tower", |n| on_runtime(n, tower_once)),
    ("sync/direct", |n| blocking(n, direct_sync)),
    ("sync/retry", |n| blocking(n, retried_sync)),
    ("sync/once/hand-loop", |n| blocking(n, hand_loop_once_sync)),
    ("sync/once/retry", |n| blocking(n, retry_once_sync)),
];

fn on_runtime<F: Future<Output = Result<u64, Failure>>>(n: u64, call: impl Fn(u64) -> F) {
    let rt = runtime();
    rt.block_on(async {
        assert_eq!(call(1).await, Ok(2));
        for _ in 0..n {
            let _ = black_box(call(black_box(1)).await);
        }
    });
}

fn blocking(n: u64, call: impl Fn(u64) -> Result<u64, Failure>) {
    assert_eq!(call(1), Ok(2));
    for _ in 0..n {
        let _ = black_box(call(black_box(1)));
    }
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [name, n] => {
            let n: u64 = n.parse().expect("N, a number of calls");
            let Some((_, run)) = VARIANTS.iter().find(|(v, _)| *v == name) else {
                let names: Vec<_> = VARIANTS.iter().map(|(v, _)| *v).collect();
                panic!("unknown variant `{name}`; the variants are: {names:?}");
            };
            run(n);
        }
        // `cargo bench` runs every bench target with `--bench`: a smoke test only.
        _ => {
            for (name, run) in VARIANTS {
                run(100);
                println!("instructions: {name} ok");
            }
        }
    }
}
