//! Time to render a model's reply to Telegram HTML and split it into messages, for a typical
//! 2 KB answer, a 9,000-character one and a 100 KB one (Markdown of every kind the renderer
//! knows, repeated), and for a hostile 100 KB line of unmatched `*` and `[`.
//!
//! Run: `cargo bench -p chela-proto --bench telegram` (`CHELA_BENCH_ITERS=N` to change the
//! count of renders per size). Prints the mean wall-clock time per render+split and the chunks.

use std::hint::black_box;
use std::time::Instant;

use chela_proto::telegram::render_chunks;

const PARAGRAPH: &str = "## Plan\n\nHere is **what I found** about _your trip_, with `code<T>` & [a link](https://example.com/a?b=1&c=2):\n\n- first item with ~~old~~ new text\n- second item\n\n> a quote from the page\n\n```rust\nfn main() { println!(\"<hi>\"); }\n```\n\n";

fn main() {
    let iters: u32 = std::env::var("CHELA_BENCH_ITERS").ok().and_then(|v| v.parse().ok()).unwrap_or(200);
    let reply = |bytes: usize| PARAGRAPH.repeat(bytes / PARAGRAPH.len() + 1);
    let cases = [
        ("2 KB answer", reply(2_000)),
        ("9,000-char answer", reply(9_000)),
        ("100 KB answer", reply(100_000)),
        ("100 KB hostile line", "*a [b ".repeat(100_000 / 6)),
    ];
    println!("{:<22} {:>12} {:>8}", "input", "per render", "chunks");
    for (name, text) in &cases {
        let chunks = render_chunks(text).len();
        let start = Instant::now();
        for _ in 0..iters {
            black_box(render_chunks(black_box(text)));
        }
        let per = start.elapsed() / iters;
        println!("{name:<22} {:>9} µs {chunks:>8}", per.as_micros());
    }
}
