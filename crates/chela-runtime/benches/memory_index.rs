//! The memory index on years of memory: build time, size, warm recall and search, quality.
//!
//! A workspace is written as a person's would be after years: `memory/entries.jsonl` with N
//! generated entries (sentences of 6 to 25 words: common English words and a vocabulary of
//! 20,000 made-up words drawn with a Zipf-like skew, a quarter tagged), one needle fact among
//! them, and three years of daily notes (1,096 files of 3 to 8 timestamped items). Then:
//!
//! - *build*: `Index::rebuild` from the files (the `chela memory reindex` path);
//! - *recall*: what one `memory_recall` call does after the build: open the index, refresh it
//!   (one stat per memory file) and run the query; p50/p90 over 200 queries of two or three
//!   words taken from random entries, with common words around them ("what about the …");
//! - *wide*: the same queries with one word no entry holds, so that no entry has them all and
//!   the search falls back to entries with any of the words (every match scored by BM25);
//! - *spread*: two or three words each from another random entry: all known, no entry holds
//!   them all (the wide search without the unknown word that is left out);
//! - *needle*: the rank of "The needle is a green kiwi" for the query "needle kiwi";
//! - *search*: the same for `memory_search` over the notes.
//!
//! Then the quality set (`benches/memory_quality.tsv`, English and Chinese facts, each with
//! paraphrased and misspelled queries) is stored among 10,000 generated entries, and
//! recall@1 and recall@5 are printed per kind of query, for BM25 alone and fused with the test
//! embedding server's vectors (`chela_testkit::FakeEmbeddings`: hashed character trigrams,
//! over real HTTP on loopback).
//!
//! *fused*: for the sizes up to 100,000 the entries are also embedded by the test server
//! (`embed::embed_pending`, the background pass) and the recall queries run fused (the query's
//! vector, brute-force cosine over every stored vector, reciprocal rank fusion): the time to
//! embed, the vectors' share of the index, fused recall p50/p90 and the needle's rank.
//!
//! Run: `cargo bench -p chela-runtime --bench memory_index` (`CHELA_BENCH_SIZES=100000,1000000`
//! to change the sizes; `CHELA_BENCH_KEEP=DIR` keeps the last workspace in DIR, for timing
//! `chela --workspace DIR cap call memory_recall …` as a whole process with farm-bench).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use chela_core::memory::{Entries, Entry};
use chela_infra::workspace::Workspace;
use chela_runtime::memory::embed::{self, Settings};
use chela_runtime::memory::fuse;
use chela_runtime::memory::index::{Index, index_path};
use chela_testkit::FakeEmbeddings;

const COMMON: &str = "the a to of and in is it for on my with at that this be was are have from not \
    about what when where who how please remember told said likes wants needs next last week day month \
    morning evening call email meeting home work school doctor friend family trip book buy pay";
const TAGS: [&str; 5] = ["travel", "work", "family", "health", "food"];
const NEEDLE: &str = "The needle is a green kiwi";

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 = self.0.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1_442_695_040_888_963_407);
        ((self.0 >> 33) as usize) % n
    }
}

/// A made-up word for rank `i`: syllables, so the stemmer sees word-like text.
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
    fn new(seed: u64) -> Gen {
        Gen { rng: Rng(seed), common: COMMON.split_whitespace().collect() }
    }

    /// A content word, skewed: rank r drawn as r = 20000^u with u uniform, so a few words are
    /// frequent and most are rare, as in real text.
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

/// The entries file's text. Made line by line rather than with `Entries::store`, whose next-id
/// scan would make a million entries quadratic to generate.
fn entries(n: usize, g: &mut Gen) -> (String, Vec<Entry>) {
    let needle_at = n / 2;
    let mut list = Vec::with_capacity(n);
    let mut text = String::new();
    for i in 0..n {
        let content = if i == needle_at { NEEDLE.to_owned() } else { g.sentence(6, 25) };
        let tags: Vec<String> = if i % 4 == 0 { vec![TAGS[g.rng.below(TAGS.len())].to_owned()] } else { Vec::new() };
        let t = 1_796_000_000 + i as u64;
        let e = Entry { id: format!("m{}", i + 1), content, tags, source: "chat".to_owned(), created: t, updated: t };
        text.push_str(&serde_json::to_string(&e).expect("an entry as JSON"));
        text.push('\n');
        list.push(e);
    }
    (text, list)
}

/// Three years of daily notes, 2023-01-01 to 2025-12-31.
fn notes(root: &Path, g: &mut Gen) -> usize {
    let mut files = 0;
    for year in 2023..=2025 {
        for month in 1..=12u32 {
            let days = match month {
                2 => 28,
                4 | 6 | 9 | 11 => 30,
                _ => 31,
            };
            for day in 1..=days {
                let date = format!("{year}-{month:02}-{day:02}");
                let mut text = format!("# {date}\n\n");
                for item in 0..3 + g.rng.below(6) {
                    let _ = writeln!(text, "- {:02}:{:02} {}", 8 + item, g.rng.below(60), g.sentence(8, 20));
                }
                if date == "2024-07-14" {
                    text.push_str("- 18:00 Planted the walnut sapling by the gate\n");
                }
                std::fs::write(root.join(format!("memory/{date}.md")), text).expect("a note written");
                files += 1;
            }
        }
    }
    files
}

fn workspace(dir: &Path) -> Workspace {
    let ws = Workspace::locate(Some(dir.to_path_buf())).expect("a workspace");
    ws.ensure().expect("the workspace's folders");
    ws
}

fn write_entries(ws: &Workspace, e: &Entries) {
    chela_infra::workspace::write_atomic(&chela_runtime::memory::entries_path(ws), e.to_jsonl().as_bytes())
        .expect("entries written");
}

fn quantile(sorted: &[f64], q: f64) -> f64 {
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

fn queries(list: &[&Entry], g: &mut Gen, n: usize) -> Vec<String> {
    (0..n)
        .map(|_| {
            let e = list[g.rng.below(list.len())];
            let words: Vec<&str> = e.content.split(' ').collect();
            let k = 2 + g.rng.below(2);
            let picked: Vec<&str> = (0..k).map(|_| words[g.rng.below(words.len())]).collect();
            format!("what about the {}?", picked.join(" "))
        })
        .collect()
}

fn size_on_disk(path: &Path) -> u64 {
    // The index is a folder of segment files and a manifest.
    std::fs::read_dir(path).map_or(0, |d| d.flatten().filter_map(|e| e.metadata().ok()).map(|m| m.len()).sum())
}

fn main() {
    let sizes: Vec<usize> = std::env::var("CHELA_BENCH_SIZES")
        .ok()
        .map(|v| v.split(',').filter_map(|s| s.trim().parse().ok()).collect())
        .unwrap_or_else(|| vec![100_000, 1_000_000]);
    let keep = std::env::var_os("CHELA_BENCH_KEEP").map(PathBuf::from);
    println!("memory index: entries + 3 years of daily notes (1,096 files); recall = open + refresh + query");
    println!(
        "{:>9} {:>9} {:>9} {:>9} {:>10} {:>10} {:>10} {:>10} {:>10} {:>7} {:>10} {:>7}",
        "entries",
        "file MB",
        "build s",
        "index MB",
        "recall p50",
        "p90 ms",
        "max ms",
        "wide p50",
        "spread p50",
        "needle",
        "search p50",
        "walnut"
    );
    for &n in &sizes {
        let tmp = tempfile::tempdir().expect("a temporary folder");
        let root = match &keep {
            Some(k) => {
                let _ = std::fs::remove_dir_all(k);
                std::fs::create_dir_all(k).expect("the kept folder");
                k.clone()
            }
            None => tmp.path().to_path_buf(),
        };
        let ws = workspace(&root);
        let mut g = Gen::new(42);
        let (text, list) = entries(n, &mut g);
        chela_infra::workspace::write_atomic(&chela_runtime::memory::entries_path(&ws), text.as_bytes())
            .expect("entries written");
        drop(text);
        notes(&root, &mut g);
        let file_mb = std::fs::metadata(chela_runtime::memory::entries_path(&ws)).map_or(0, |m| m.len()) as f64 / 1e6;

        let t = Instant::now();
        Index::rebuild(&ws).expect("the index built");
        let build = t.elapsed().as_secs_f64();
        let index_mb = size_on_disk(&index_path(&ws)) as f64 / 1e6;

        let list: Vec<&Entry> = list.iter().collect();
        let qs = queries(&list, &mut g, 200);
        let mut ms = Vec::new();
        for q in &qs {
            let t = Instant::now();
            let mut ix = Index::open(&ws).expect("open");
            ix.refresh().expect("refresh");
            std::hint::black_box(ix.recall(q, 8).expect("recall"));
            ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        ms.sort_by(f64::total_cmp);
        // The same queries with one word no entry holds: no entry has all the words, so the
        // wider search (any word) runs: the slow case.
        let mut wide = Vec::new();
        for q in qs.iter().take(100) {
            let t = Instant::now();
            let mut ix = Index::open(&ws).expect("open");
            ix.refresh().expect("refresh");
            std::hint::black_box(ix.recall(&format!("{q} zzqxv"), 8).expect("recall"));
            wide.push(t.elapsed().as_secs_f64() * 1e3);
        }
        wide.sort_by(f64::total_cmp);
        let mut spread = Vec::new();
        for _ in 0..100 {
            let k = 2 + g.rng.below(2);
            let picked: Vec<&str> = (0..k)
                .map(|_| {
                    let words: Vec<&str> = list[g.rng.below(list.len())].content.split(' ').collect();
                    words[g.rng.below(words.len())]
                })
                .collect();
            let t = Instant::now();
            let mut ix = Index::open(&ws).expect("open");
            ix.refresh().expect("refresh");
            std::hint::black_box(ix.recall(&format!("what about {}", picked.join(" ")), 8).expect("recall"));
            spread.push(t.elapsed().as_secs_f64() * 1e3);
        }
        spread.sort_by(f64::total_cmp);
        let mut ix = Index::open(&ws).expect("open");
        ix.refresh().expect("refresh");
        let needle = ix.recall("needle kiwi", 8).expect("recall");
        let needle_rank =
            needle.iter().position(|h| h.content == NEEDLE).map_or("-".to_owned(), |r| (r + 1).to_string());
        let mut sms = Vec::new();
        for q in qs.iter().take(100) {
            let t = Instant::now();
            let mut ix = Index::open(&ws).expect("open");
            ix.refresh().expect("refresh");
            std::hint::black_box(ix.search(q, 8).expect("search"));
            sms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        sms.sort_by(f64::total_cmp);
        let walnut = ix.search("when did I plant the walnut tree", 5).expect("search");
        let walnut_rank = walnut
            .iter()
            .position(|h| h.path == "memory/2024-07-14.md" && h.snippet.contains("walnut"))
            .map_or("-".to_owned(), |r| (r + 1).to_string());
        println!(
            "{n:>9} {file_mb:>9.1} {build:>9.2} {index_mb:>9.1} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {:>10.2} {needle_rank:>7} {:>10.2} {walnut_rank:>7}",
            quantile(&ms, 0.5),
            quantile(&ms, 0.9),
            ms[ms.len() - 1],
            quantile(&wide, 0.5),
            quantile(&spread, 0.5),
            quantile(&sms, 0.5),
        );
        if n <= 100_000 {
            fused(&ws, &qs);
        }
    }
    quality();
}

/// The test embedding server, the client and a runtime to drive them.
struct Embedder {
    fake: FakeEmbeddings,
    http: chela_net::HttpClient,
    rt: tokio::runtime::Runtime,
}

impl Embedder {
    fn new() -> Embedder {
        Embedder {
            fake: FakeEmbeddings::start(),
            http: chela_net::HttpClient::new(chela_net::ClientOptions::default()),
            rt: tokio::runtime::Builder::new_current_thread().enable_all().build().expect("a runtime"),
        }
    }

    fn settings(&self) -> Settings {
        Settings::new(&self.fake.base_url(), "test-embed", "").expect("settings")
    }

    fn embed_all(&self, ws: &Workspace) {
        self.rt.block_on(embed::embed_pending(ws, &self.http, &self.settings())).expect("embedded");
    }

    /// What `memory_recall` does with embeddings set: the query's vector, then open, refresh
    /// and the fused ranking.
    fn recall(&self, ws: &Workspace, query: &str, max: usize) -> Vec<chela_runtime::memory::index::EntryHit> {
        let s = self.settings();
        let q = self.rt.block_on(embed::query_vector(&self.http, &s, query)).expect("a query vector");
        let mut ix = Index::open(ws).expect("open");
        ix.refresh().expect("refresh");
        fuse::recall(&mut ix, query, &q, &s.model, max).expect("fused recall")
    }
}

/// The same workspace with every entry and chunk embedded by the test server: recall fused.
fn fused(ws: &Workspace, qs: &[String]) {
    let e = Embedder::new();
    let before = size_on_disk(&index_path(ws));
    let t = Instant::now();
    e.embed_all(ws);
    let secs = t.elapsed().as_secs_f64();
    let vectors_mb = size_on_disk(&index_path(ws)).saturating_sub(before) as f64 / 1e6;
    let mut ms = Vec::new();
    for q in qs.iter().take(100) {
        let t = Instant::now();
        std::hint::black_box(e.recall(ws, q, 8));
        ms.push(t.elapsed().as_secs_f64() * 1e3);
    }
    ms.sort_by(f64::total_cmp);
    let needle = e.recall(ws, "needle kiwi", 8);
    let rank = needle.iter().position(|h| h.content == NEEDLE).map_or("-".to_owned(), |r| (r + 1).to_string());
    println!(
        "  fused ({} dims, test server): embed all {secs:.1} s, vectors +{vectors_mb:.1} MB, recall p50 {:.2} ms, \
         p90 {:.2} ms, needle rank {rank}",
        chela_testkit::embed::DIMENSIONS,
        quantile(&ms, 0.5),
        quantile(&ms, 0.9),
    );
}

/// recall@1 and recall@5 of the quality set, stored among 10,000 generated entries.
fn quality() {
    let set = include_str!("memory_quality.tsv");
    let tmp = tempfile::tempdir().expect("a temporary folder");
    let ws = workspace(tmp.path());
    let mut g = Gen::new(7);
    let mut e = Entries::default();
    for i in 0..10_000u64 {
        e.store_within(&g.sentence(6, 25), &[], "", i, usize::MAX).expect("an entry");
    }
    // kind -> [queries, BM25 found first, in the first five, fused first, fused in the first five]
    let mut by_kind: Vec<(String, [usize; 5])> = Vec::new();
    let mut cases: Vec<(String, String, String)> = Vec::new();
    for line in set.lines().filter(|l| !l.starts_with('#') && !l.trim().is_empty()) {
        let cols: Vec<&str> = line.split('\t').collect();
        let [lang, fact, rest @ ..] = cols.as_slice() else { continue };
        let id = e.store_within(fact, &[], "", 20_000, usize::MAX).expect("a fact").id.clone();
        for q in rest {
            let Some((kind, query)) = q.split_once(':') else { continue };
            cases.push((format!("{lang} {kind}"), query.to_owned(), id.clone()));
        }
    }
    write_entries(&ws, &e);
    let embedder = Embedder::new();
    embedder.embed_all(&ws);
    let mut ix = Index::open(&ws).expect("open");
    ix.refresh().expect("refresh");
    let mut misses = Vec::new();
    for (kind, query, id) in &cases {
        let words = ix.recall(query, 5).expect("recall");
        let rank = words.iter().position(|h| &h.id == id);
        let fused = embedder.recall(&ws, query, 5);
        let fused_rank = fused.iter().position(|h| &h.id == id);
        let row = match by_kind.iter_mut().find(|r| &r.0 == kind) {
            Some(r) => r,
            None => {
                by_kind.push((kind.clone(), [0; 5]));
                by_kind.last_mut().expect("just pushed")
            }
        };
        row.1[0] += 1;
        row.1[1] += usize::from(rank == Some(0));
        row.1[2] += usize::from(rank.is_some());
        row.1[3] += usize::from(fused_rank == Some(0));
        row.1[4] += usize::from(fused_rank.is_some());
        if rank.is_none() || fused_rank.is_none() {
            let how = match (rank, fused_rank) {
                (None, None) => "both",
                (None, Some(_)) => "BM25 only",
                _ => "fused only",
            };
            misses.push(format!("{kind} ({how}): {query}"));
        }
    }
    println!(
        "quality: {} facts among 10,000 generated entries; BM25 alone, and fused with the test embedding server",
        set.lines().filter(|l| l.contains('\t')).count()
    );
    println!(
        "{:>16} {:>8} {:>9} {:>9} {:>10} {:>10}",
        "queries", "count", "recall@1", "recall@5", "fused @1", "fused @5"
    );
    let mut all = [0; 5];
    for (kind, r) in &by_kind {
        let n = r[0] as f64;
        println!(
            "{kind:>16} {:>8} {:>9.2} {:>9.2} {:>10.2} {:>10.2}",
            r[0],
            r[1] as f64 / n,
            r[2] as f64 / n,
            r[3] as f64 / n,
            r[4] as f64 / n
        );
        for (a, x) in all.iter_mut().zip(r) {
            *a += x;
        }
    }
    let n = all[0] as f64;
    println!(
        "{:>16} {:>8} {:>9.2} {:>9.2} {:>10.2} {:>10.2}",
        "all",
        all[0],
        all[1] as f64 / n,
        all[2] as f64 / n,
        all[3] as f64 / n,
        all[4] as f64 / n
    );
    for m in misses {
        println!("  missed: {m}");
    }
}
