//! Semantic search against the test embedding server (`chela_testkit::FakeEmbeddings`) over
//! real HTTP on loopback.

use chela_testkit::embed::{DIMENSIONS, FakeEmbeddings, Hostile};
use serde_json::json;

use super::*;
use crate::testing::Fixture;
use crate::tools::memory::{MemoryRecall, MemorySearch, MemoryUpdate};

const MODEL: &str = "test-embed";

fn fixture(url: &str) -> Fixture {
    Fixture::new(&[("memory.embeddings_url", url), ("memory.embeddings_model", MODEL)])
}

fn settings(fx: &Fixture) -> Settings {
    Settings::from_config(&fx.cfg).expect("embeddings set")
}

/// Facts m1 to m4, one of them the one the misspelled query means. Written to the file, not
/// through `memory_store`, so that no background pass starts.
async fn store_facts(fx: &Fixture) {
    let mut e = chela_core::memory::Entries::default();
    for fact in [
        "The dentist appointment is on Thursday at nine",
        "Ana lives in Lisbon near the river",
        "Prefers oat milk in coffee",
        "The car needs new tyres before winter",
    ] {
        e.store_within(fact, &[], "", 1, usize::MAX).unwrap();
    }
    crate::workspace::write_atomic(&crate::memory::entries_path(&fx.ws), e.to_jsonl().as_bytes()).unwrap();
}

fn vectors(fx: &Fixture) -> Vec<(u8, u64, String, usize)> {
    let ix = Index::open(&fx.ws).unwrap();
    let mut out = Vec::new();
    ix.store().each_vector(|v| out.push((v.kind, v.doc, v.model.to_owned(), v.values.len()))).unwrap();
    out.sort_by_key(|v| (v.0, v.1));
    out
}

/// A port nothing listens on.
fn closed_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn dot_is_the_dot_product_at_every_length() {
    for n in [1, 7, 8, 9, 256, 1000] {
        let a: Vec<f32> = (0..n).map(|i| (i % 7) as f32 - 3.0).collect();
        let b: Vec<f32> = (0..n).map(|i| (i % 5) as f32 * 0.5).collect();
        let want: f32 = a.iter().zip(&b).map(|(x, y)| x * y).sum();
        assert!((dot(&to_blob(&a), &b) - want).abs() < 1e-3, "{n}");
    }
}

#[test]
fn settings_need_both_url_and_model() {
    assert!(Settings::from_config(&Fixture::new(&[]).cfg).is_none());
    assert!(Settings::new("http://127.0.0.1:1/v1", "", "").is_none());
    assert!(Settings::new("", "m", "").is_none());
    let s = Settings::new("http://127.0.0.1:1/v1/", " m ", "").unwrap();
    assert_eq!((s.url.as_str(), s.model.as_str()), ("http://127.0.0.1:1/v1", "m"));
}

#[tokio::test]
async fn a_misspelled_query_keywords_miss_is_found_with_embeddings() {
    let fake = FakeEmbeddings::start();
    let fx = fixture(&fake.base_url());
    store_facts(&fx).await;
    // Two slips per word (doubled keys), beyond the one-edit spelling correction of the keyword search.
    let query = "dentisstt apppointmment thurssdayy";
    let mut ix = Index::open(&fx.ws).unwrap();
    ix.refresh().unwrap();
    assert!(ix.recall(query, 5).unwrap().is_empty(), "BM25 alone finds nothing");
    drop(ix);
    let pass = embed_pending(&fx.ws, &fx.http, &settings(&fx)).await.unwrap();
    assert!(vectors(&fx).len() >= 4, "{pass:?}");
    let hits = fx.call(MemoryRecall, json!({"query": query})).await.unwrap();
    assert!(hits.lines().next().unwrap().contains("dentist appointment"), "{hits}");
    // The query itself went to the server, in OpenAI's format.
    assert!(fake.calls().iter().any(|c| c.inputs == [query] && c.model == MODEL));
}

/// Every search has nearest vectors; only those near enough count, so a query about nothing
/// remembered still finds nothing.
#[tokio::test]
async fn a_query_about_nothing_remembered_still_finds_nothing() {
    let fake = FakeEmbeddings::start();
    let fx = fixture(&fake.base_url());
    store_facts(&fx).await;
    embed_pending(&fx.ws, &fx.http, &settings(&fx)).await.unwrap();
    let none = fx.call(MemoryRecall, json!({"query": "volcano eruption"})).await.unwrap();
    assert!(none.starts_with("Nothing remembered"), "{none}");
    let q = chela_testkit::embed::vector("volcano eruption");
    let ix = Index::open(&fx.ws).unwrap();
    let near = nearest(&ix, Kind::Entry, MODEL, &q, 4).unwrap();
    assert_eq!(near.len(), 4, "the vectors are there, only far");
    assert!(near.iter().all(|(_, s)| *s < crate::memory::fuse::MIN_SIMILARITY), "{near:?}");
}

#[tokio::test]
async fn notes_are_searched_by_meaning_too() {
    let fake = FakeEmbeddings::start();
    let fx = fixture(&fake.base_url());
    std::fs::create_dir_all(fx.root().join("memory")).unwrap();
    std::fs::write(
        fx.root().join("memory/2026-07-14.md"),
        "# 2026-07-14\n\n- 18:00 Planted the walnut sapling by the gate\n\n- 19:00 Dinner with Ana\n",
    )
    .unwrap();
    embed_pending(&fx.ws, &fx.http, &settings(&fx)).await.unwrap();
    let hits = fx.call(MemorySearch, json!({"query": "walnutt saplng"})).await.unwrap();
    assert!(hits.starts_with("memory/2026-07-14.md:3: - 18:00 Planted the walnut"), "{hits}");
}

#[tokio::test]
async fn server_down_leaves_keyword_search_working() {
    let fx = fixture(&format!("http://127.0.0.1:{}/v1", closed_port()));
    store_facts(&fx).await;
    let hits = fx.call(MemoryRecall, json!({"query": "where does Ana live"})).await.unwrap();
    assert_eq!(hits, "[m2] Ana lives in Lisbon near the river");
    let e = embed_pending(&fx.ws, &fx.http, &settings(&fx)).await.unwrap_err();
    assert!(e.to_string().contains("request failed"), "{e}");
    assert!(vectors(&fx).is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_stalled_server_costs_a_search_its_short_timeout_only() {
    let fake = FakeEmbeddings::start();
    let fx = fixture(&fake.base_url());
    store_facts(&fx).await;
    fake.push_hostile(Hostile::Stall(Duration::from_secs(3600)));
    let t = tokio::time::Instant::now();
    assert_eq!(query_vector(&fx.http, &settings(&fx), "Ana").await, None);
    assert!(t.elapsed() <= QUERY_TIMEOUT + Duration::from_millis(100), "{:?}", t.elapsed());
}

#[tokio::test]
async fn model_change_re_embeds_and_a_changed_text_only_itself() {
    let fake = FakeEmbeddings::start();
    let fx = fixture(&fake.base_url());
    store_facts(&fx).await;
    let s = settings(&fx);
    let first = embed_pending(&fx.ws, &fx.http, &s).await.unwrap();
    assert_eq!(first.embedded, 4);
    assert_eq!(embed_pending(&fx.ws, &fx.http, &s).await.unwrap().embedded, 0, "nothing new, nothing sent");

    fx.call(MemoryUpdate, json!({"id": "m3", "content": "Prefers soy milk in tea"})).await.unwrap();
    let before = fake.inputs().len();
    assert_eq!(embed_pending(&fx.ws, &fx.http, &s).await.unwrap().embedded, 1);
    assert_eq!(fake.inputs()[before..], ["Prefers soy milk in tea".to_owned()]);

    let other = Settings::new(&s.url, "another-model", "").unwrap();
    assert_eq!(embed_pending(&fx.ws, &fx.http, &other).await.unwrap().embedded, 4);
    let held = vectors(&fx);
    assert_eq!(held.len(), 4);
    assert!(held.iter().all(|v| v.2 == "another-model" && v.3 == DIMENSIONS * 4), "{held:?}");
}

#[tokio::test]
async fn a_stale_vector_is_never_returned() {
    let fake = FakeEmbeddings::start();
    let fx = fixture(&fake.base_url());
    store_facts(&fx).await;
    embed_pending(&fx.ws, &fx.http, &settings(&fx)).await.unwrap();
    let old = chela_testkit::embed::vector("Ana lives in Lisbon near the river");
    let ix = Index::open(&fx.ws).unwrap();
    let rowid_of_m2 = nearest(&ix, Kind::Entry, MODEL, &old, 1).unwrap()[0].0;
    drop(ix);
    // Rewritten by hand: the whole file is read again, the vector not yet made.
    let path = crate::memory::entries_path(&fx.ws);
    let text = std::fs::read_to_string(&path).unwrap().replace("Ana lives in Lisbon", "Bo lives in Oslo");
    crate::workspace::write_atomic(&path, text.as_bytes()).unwrap();
    let mut ix = Index::open(&fx.ws).unwrap();
    ix.refresh().unwrap();
    let near = nearest(&ix, Kind::Entry, MODEL, &old, 4).unwrap();
    assert!(near.iter().all(|(r, _)| *r != rowid_of_m2), "the old text's vector came back: {near:?}");
}

#[tokio::test]
async fn batches_and_inputs_are_bounded() {
    let fake = FakeEmbeddings::start();
    let fx = fixture(&fake.base_url());
    let mut e = chela_core::memory::Entries::default();
    for i in 0..(BATCH * 2 + 5) {
        e.store_within(&format!("fact number {i} about things"), &[], "", 1, usize::MAX).unwrap();
    }
    crate::workspace::write_atomic(&crate::memory::entries_path(&fx.ws), e.to_jsonl().as_bytes()).unwrap();
    std::fs::create_dir_all(fx.root().join("memory")).unwrap();
    let long = format!("- {}\n", "walnut é ".repeat(3000));
    std::fs::write(fx.root().join("memory/2026-01-01.md"), &long).unwrap();
    let pass = embed_pending(&fx.ws, &fx.http, &settings(&fx)).await.unwrap();
    assert_eq!(pass.embedded, BATCH * 2 + 5 + 1);
    let calls = fake.calls();
    assert_eq!(calls.len(), 4);
    assert!(calls.iter().all(|c| c.inputs.len() <= BATCH));
    let longest = calls.iter().flat_map(|c| &c.inputs).map(String::len).max().unwrap();
    assert!(longest <= MAX_INPUT_BYTES && longest > MAX_INPUT_BYTES - 4, "{longest}");
    // A query is cut the same way.
    let q = "x".repeat(MAX_INPUT_BYTES * 3);
    query_vector(&fx.http, &settings(&fx), &q).await.unwrap();
    assert_eq!(fake.calls().last().unwrap().inputs[0].len(), MAX_INPUT_BYTES);
}

#[tokio::test]
async fn one_pass_per_workspace_at_a_time() {
    let fake = FakeEmbeddings::start();
    let fx = fixture(&fake.base_url());
    store_facts(&fx).await;
    let s = settings(&fx);
    let first = kick(&fx.ws, &s, &fx.http).expect("a pass started");
    assert!(kick(&fx.ws, &s, &fx.http).is_none(), "a second pass while one runs");
    first.await.unwrap();
    assert_eq!(vectors(&fx).len(), 4);
    let inputs = fake.inputs();
    let mut unique = inputs.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(unique.len(), inputs.len(), "a text embedded twice: {inputs:?}");
}

/// Each hostile answer is refused whole: nothing stored, keyword search unchanged.
#[tokio::test]
async fn hostile_answers_are_refused() {
    for (hostile, why) in [
        (Hostile::NaN, "not an embeddings answer"),
        (Hostile::Huge, "not a finite number"),
        (Hostile::Dimensions(DIMENSIONS + 1), "vectors of"),
        (Hostile::Dimensions(MAX_DIMENSIONS + 1), "values"),
        (Hostile::Fewer, "3 vectors for 4 inputs"),
        (Hostile::Endless, "request failed"),
        (Hostile::Status(400), "answered 400"),
        (Hostile::Status(401), "answered 401"),
    ] {
        let fake = FakeEmbeddings::start();
        let fx = fixture(&fake.base_url());
        store_facts(&fx).await;
        fake.push_hostile(hostile.clone());
        let e = embed_pending(&fx.ws, &fx.http, &settings(&fx)).await.unwrap_err();
        assert!(e.to_string().contains(why), "{hostile:?}: {e}");
        assert!(vectors(&fx).is_empty(), "{hostile:?}");
        let hits = fx.call(MemoryRecall, json!({"query": "Ana Lisbon"})).await.unwrap();
        assert!(hits.starts_with("[m2] Ana lives"), "{hostile:?}: {hits}");
    }
}

#[tokio::test]
async fn a_vector_of_another_length_than_the_model_holds_is_refused() {
    let fake = FakeEmbeddings::start();
    let fx = fixture(&fake.base_url());
    store_facts(&fx).await;
    embed_pending(&fx.ws, &fx.http, &settings(&fx)).await.unwrap();
    fx.call(MemoryUpdate, json!({"id": "m1", "content": "The dentist moved to Friday"})).await.unwrap();
    fake.push_hostile(Hostile::Dimensions(DIMENSIONS / 2));
    let e = embed_pending(&fx.ws, &fx.http, &settings(&fx)).await.unwrap_err();
    assert!(e.to_string().contains("where the index holds 256"), "{e}");
    assert!(vectors(&fx).iter().all(|v| v.3 == DIMENSIONS * 4));
}

/// Real loopback and paused time do not mix (the paused clock runs to the request's timeout
/// while the fake answers), so the test gives the retries zero waits and the policy's own waits
/// are checked apart.
#[tokio::test]
async fn a_server_error_is_retried() {
    let fake = FakeEmbeddings::start();
    let fx = fixture(&fake.base_url());
    store_facts(&fx).await;
    fake.push_hostile(Hostile::Status(503));
    fake.push_hostile(Hostile::Status(429));
    let no_wait = Exponential::new(Duration::ZERO, Duration::ZERO);
    let pass = embed_pending_with(&fx.ws, &fx.http, &settings(&fx), no_wait).await.unwrap();
    assert_eq!((pass.embedded, pass.requests), (4, 3));
    for _ in 0..ATTEMPTS {
        fake.push_hostile(Hostile::Status(500));
    }
    fx.call(MemoryUpdate, json!({"id": "m1", "content": "The dentist moved to Friday"})).await.unwrap();
    let e = embed_pending_with(&fx.ws, &fx.http, &settings(&fx), no_wait).await.unwrap_err();
    assert!(e.to_string().contains("answered 500"), "{e}");
    assert_eq!(fake.calls().len(), 3 + ATTEMPTS as usize, "gave up after {ATTEMPTS} attempts");
    assert_eq!([RETRY.step(0), RETRY.step(1), RETRY.step(9)].map(|d| d.as_secs()), [1, 2, 30]);
}

#[tokio::test]
async fn the_key_is_sent_as_a_bearer_token() {
    let fake = FakeEmbeddings::start();
    fake.require_key("sk-embed-test");
    let fx = Fixture::new(&[
        ("memory.embeddings_url", &fake.base_url()),
        ("memory.embeddings_model", MODEL),
        ("memory.embeddings_key", "sk-embed-test"),
    ]);
    store_facts(&fx).await;
    assert_eq!(embed_pending(&fx.ws, &fx.http, &settings(&fx)).await.unwrap().embedded, 4);
    let wrong = Settings::new(&fake.base_url(), MODEL, "sk-wrong").unwrap();
    assert!(query_vector(&fx.http, &wrong, "Ana").await.is_none());
}

mod parsing {
    use super::super::{MAX_DIMENSIONS, parse};
    use proptest::prelude::*;

    fn accepted_is_sane(v: &[Vec<f32>], n: usize) {
        assert_eq!(v.len(), n);
        for x in v {
            assert!(!x.is_empty() && x.len() <= MAX_DIMENSIONS && x.len() == v[0].len());
            let norm: f32 = x.iter().map(|a| a * a).sum::<f32>().sqrt();
            assert!(x.iter().all(|a| a.is_finite()) && (norm - 1.0).abs() < 1e-3, "{norm}");
        }
    }

    proptest! {
        /// Any bytes: no panic, and whatever is accepted holds `n` finite unit vectors.
        #[test]
        fn any_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..512), n in 1usize..4) {
            if let Ok(v) = parse(&bytes, n) {
                accepted_is_sane(&v, n);
            }
        }

        /// Answers of the right shape with any numbers, indices and lengths.
        #[test]
        fn any_numbers(
            items in proptest::collection::vec(
                (0usize..4, proptest::collection::vec(prop_oneof![any::<f64>(), -2.0f64..2.0], 0..8)),
                0..5,
            ),
            n in 1usize..4,
        ) {
            let data: Vec<serde_json::Value> = items
                .iter()
                .map(|(i, e)| serde_json::json!({"object": "embedding", "index": i, "embedding": e}))
                .collect();
            let body = serde_json::json!({"object": "list", "data": data}).to_string();
            if let Ok(v) = parse(body.as_bytes(), n) {
                accepted_is_sane(&v, n);
            }
        }
    }

    #[test]
    fn a_well_formed_answer_comes_back_in_input_order() {
        let body = r#"{"object":"list","data":[{"object":"embedding","index":1,"embedding":[0,2]},
            {"object":"embedding","index":0,"embedding":[3,4]}],"model":"m","usage":{"prompt_tokens":2,"total_tokens":2}}"#;
        assert_eq!(parse(body.as_bytes(), 2).unwrap(), vec![vec![0.6, 0.8], vec![0.0, 1.0]]);
        let twice = body.replace(r#""index":0"#, r#""index":1"#);
        assert!(parse(twice.as_bytes(), 2).unwrap_err().to_string().contains("out of place"));
    }
}
