//! The new memory engine (`memory::engine::store`, not wired into `memory::index` yet) on the
//! entries of `memory_index`'s generator (same seed, same sentences, same queries), so its
//! figures sit beside SQLite's: build, size on disk, and the store-level cost of one recall.
//!
//! *recall* = open the store (manifest and segments) + the "every word" search over the
//! query's terms (2-3 words from a random entry, the common words dropped) with the newest
//! 20,000 matches scored, and the "any word" search when nothing holds them all. *spread* =
//! two or three words each from another entry: the "every" search finds nothing and the "any"
//! search scores the newest 20,000 matches (the `wide` path). Not measured here yet: the
//! file stat of a refresh and the spelling lookups (they come with the wiring).
//!
//! Then the quality set (`benches/memory_quality.tsv`) among 10,000 generated entries, as
//! `memory_index` stores it, ranked by the engine's staged query: recall@1 and recall@5 per
//! kind of query, BM25 alone (the vectors are not on the engine yet).
//!
//! Run: `cargo bench -p chela-runtime --bench memory_engine` (`CHELA_BENCH_SIZES=100000,1000000`).

use std::time::Instant;

use chela_runtime::memory::engine::manifest::Table;
use chela_runtime::memory::engine::query::staged;
use chela_runtime::memory::engine::store::{Query, Store};
use chela_runtime::memory::engine::tokens::terms;
use chela_runtime::memory::engine::{for_index, spelling_words};

const COMMON: &str = "the a to of and in is it for on my with at that this be was are have from not \
    about what when where who how please remember told said likes wants needs next last week day month \
    morning evening call email meeting home work school doctor friend family trip book buy pay";
const TAGS: [&str; 5] = ["travel", "work", "family", "health", "food"];
const NEEDLE: &str = "The needle is a green kiwi";
/// `terms::STOP_WORDS` among the query's words.
const STOP: &[&str] = &["what", "about", "the", "a", "is"];

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) as usize) % n
    }
}

fn word(i: usize) -> String {
    const SYL: [&str; 24] = [
        "ka", "lo", "mi", "re", "tu", "ban", "sol", "ver", "ny", "qui", "dor", "pa", "el", "zi", "gor", "het", "sa",
        "mon", "tri", "ul", "fe", "bri", "cas", "dun",
    ];
    let mut x = i + 24;
    let mut w = String::new();
    while x > 0 {
        w.push_str(SYL[x % 24]);
        x /= 24;
    }
    w
}

struct Gen {
    rng: Rng,
    common: Vec<&'static str>,
}

impl Gen {
    fn content_word(&mut self) -> String {
        let u = self.rng.below(1_000_000) as f64 / 1_000_000.0;
        word(20_000f64.powf(u) as usize)
    }

    fn sentence(&mut self, lo: usize, hi: usize) -> String {
        let n = lo + self.rng.below(hi - lo + 1);
        let mut out = String::new();
        for i in 0..n {
            if i > 0 {
                out.push(' ');
            }
            if self.rng.below(5) < 2 {
                out.push_str(self.common[self.rng.below(self.common.len())]);
            } else {
                out.push_str(&self.content_word());
            }
        }
        out
    }
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn groups(q: &str) -> Vec<Vec<String>> {
    let mut out: Vec<Vec<String>> = Vec::new();
    for w in q.split(|c: char| !c.is_alphanumeric()).filter(|w| !w.is_empty() && !STOP.contains(w)) {
        let t = terms(w);
        if !t.is_empty() && !out.contains(&t) {
            out.push(t);
        }
    }
    out
}

/// The staged recall: every word, then any word.
fn recall(dir: &std::path::Path, q: &str) -> usize {
    let s = Store::open(dir).expect("open");
    let g = groups(q);
    let query = Query { groups: &g, every: true, weights: &[1.0, 2.0], max_scored: 20_000, max: 8 };
    let hits = s.search(Table::Entries, &query).expect("search");
    if !hits.is_empty() || g.len() == 1 {
        return hits.len();
    }
    s.search(Table::Entries, &Query { every: false, ..query }).expect("search").len()
}

fn main() {
    let sizes: Vec<usize> = std::env::var("CHELA_BENCH_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100_000, 1_000_000]);
    println!("memory engine (store level): entries only; recall = open + every-word search (+ any-word when empty)");
    println!(
        "{:>9} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10} {:>7}",
        "entries", "build s", "index MB", "recall p50", "p90 ms", "max ms", "spread p50", "needle"
    );
    for &n in &sizes {
        let tmp = tempfile::tempdir().expect("a temporary folder");
        let dir = tmp.path().join("index");
        let mut g = Gen { rng: Rng(42), common: COMMON.split_whitespace().collect() };
        let mut contents = Vec::with_capacity(n);
        let t = Instant::now();
        Store::write(&dir, |w| {
            w.reset_source("memory/entries.jsonl", "stamp", Table::Entries);
            for i in 0..n {
                let content = if i == n / 2 { NEEDLE.to_owned() } else { g.sentence(6, 25) };
                let tags = if i % 4 == 0 { TAGS[g.rng.below(TAGS.len())] } else { "" };
                w.add("memory/entries.jsonl", &format!("m{}", i + 1), &[&content, tags], content.as_bytes())?;
                contents.push(content);
            }
            Ok(())
        })
        .expect("built");
        let build = t.elapsed().as_secs_f64();
        let mb = std::fs::read_dir(&dir)
            .expect("the folder")
            .flatten()
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum::<u64>() as f64
            / 1e6;
        let mut ms = Vec::new();
        for _ in 0..200 {
            let words: Vec<&str> = contents[g.rng.below(n)].split(' ').collect();
            let k = 2 + g.rng.below(2);
            let picked: Vec<&str> = (0..k).map(|_| words[g.rng.below(words.len())]).collect();
            let q = format!("what about the {}?", picked.join(" "));
            let t = Instant::now();
            std::hint::black_box(recall(&dir, &q));
            ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        ms.sort_by(f64::total_cmp);
        let mut spread = Vec::new();
        for _ in 0..100 {
            let k = 2 + g.rng.below(2);
            let picked: Vec<&str> = (0..k)
                .map(|_| {
                    let words: Vec<&str> = contents[g.rng.below(n)].split(' ').collect();
                    words[g.rng.below(words.len())]
                })
                .collect();
            let t = Instant::now();
            std::hint::black_box(recall(&dir, &format!("what about {}", picked.join(" "))));
            spread.push(t.elapsed().as_secs_f64() * 1e3);
        }
        spread.sort_by(f64::total_cmp);
        let s = Store::open(&dir).expect("open");
        let g2 = groups("needle kiwi");
        let hits = s
            .search(
                Table::Entries,
                &Query { groups: &g2, every: true, weights: &[1.0, 2.0], max_scored: 20_000, max: 8 },
            )
            .expect("search");
        let rank = hits
            .iter()
            .position(|h| s.stored(Table::Entries, h.doc).ok().flatten().as_deref() == Some(NEEDLE.as_bytes()))
            .map_or("-".to_owned(), |r| (r + 1).to_string());
        println!(
            "{n:>9} {build:>9.2} {mb:>9.1} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {rank:>7}",
            quantile(&ms, 0.5),
            quantile(&ms, 0.9),
            ms[ms.len() - 1],
            quantile(&spread, 0.5)
        );
    }
    quality();
}

/// The quality set on the engine: facts among 10,000 generated entries, each query's rank.
fn quality() {
    let set = include_str!("memory_quality.tsv");
    let tmp = tempfile::tempdir().expect("a temporary folder");
    let dir = tmp.path().join("index");
    let mut g = Gen { rng: Rng(7), common: COMMON.split_whitespace().collect() };
    let mut facts: Vec<String> = (0..10_000).map(|_| g.sentence(6, 25)).collect();
    let mut cases: Vec<(String, String, String)> = Vec::new();
    for line in set.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let cols: Vec<&str> = line.split('\t').collect();
        let [lang, fact, rest @ ..] = cols.as_slice() else { continue };
        facts.push((*fact).to_owned());
        for q in rest {
            let Some((kind, query)) = q.split_once(':') else { continue };
            cases.push((format!("{lang} {kind}"), query.to_owned(), (*fact).to_owned()));
        }
    }
    Store::write(&dir, |w| {
        w.reset_source("memory/entries.jsonl", "stamp", Table::Entries);
        for (i, f) in facts.iter().enumerate() {
            for word in spelling_words(f) {
                w.add_word(Table::Entries, &word);
            }
            w.add("memory/entries.jsonl", &format!("m{}", i + 1), &[&for_index(f), ""], f.as_bytes())?;
        }
        Ok(())
    })
    .expect("built");
    let s = Store::open(&dir).expect("open");
    let mut by_kind: Vec<(String, [usize; 3])> = Vec::new();
    let mut misses = Vec::new();
    for (kind, query, fact) in &cases {
        let mut hits = staged(&s, Table::Entries, query, 5).expect("recall");
        // The index breaks ties by the newest entry first.
        hits.sort_by(|a, b| a.score.total_cmp(&b.score).then(b.doc.cmp(&a.doc)));
        let texts: Vec<Vec<u8>> =
            hits.iter().map(|h| s.stored(Table::Entries, h.doc).expect("read").expect("live")).collect();
        let rank = texts.iter().position(|t| t == fact.as_bytes());
        let row = match by_kind.iter_mut().find(|r| &r.0 == kind) {
            Some(r) => r,
            None => {
                by_kind.push((kind.clone(), [0; 3]));
                by_kind.last_mut().expect("just pushed")
            }
        };
        row.1[0] += 1;
        row.1[1] += usize::from(rank == Some(0));
        row.1[2] += usize::from(rank.is_some());
        if rank.is_none() {
            misses.push(format!("{kind}: {query}"));
        }
    }
    println!("quality on the engine: the set among 10,000 generated entries; BM25 alone");
    println!("{:>16} {:>8} {:>9} {:>9}", "queries", "count", "recall@1", "recall@5");
    let mut all = [0; 3];
    for (kind, r) in &by_kind {
        let n = r[0] as f64;
        println!("{kind:>16} {:>8} {:>9.2} {:>9.2}", r[0], r[1] as f64 / n, r[2] as f64 / n);
        for (a, x) in all.iter_mut().zip(r) {
            *a += x;
        }
    }
    let n = all[0] as f64;
    println!("{:>16} {:>8} {:>9.2} {:>9.2}", "all", all[0], all[1] as f64 / n, all[2] as f64 / n);
    for m in misses {
        println!("  missed: {m}");
    }
}
