use chela_testkit::{FakeLlm, Step};
use serde_json::{Value, json};

use super::*;
use crate::app::App;
use crate::workspace::Workspace;

const PNG: &[u8] = b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR";

fn app(llm: &FakeLlm, provider: &str, settings: &[(&str, &str)]) -> (tempfile::TempDir, App) {
    let dir = tempfile::tempdir().unwrap();
    let ws = Workspace::locate(Some(dir.path().join("ws"))).unwrap();
    ws.ensure().unwrap();
    let url = if provider == "openai" { llm.openai_base_url() } else { llm.anthropic_base_url() };
    let base =
        [("llm.provider", provider), ("llm.base_url", url.as_str()), ("llm.api_key", "k"), ("llm.max_retries", "0")];
    for (k, v) in base.iter().chain(settings) {
        crate::config::set_override(&ws, k, v).unwrap();
    }
    let app = App::load(ws).unwrap();
    (dir, app)
}

fn image(n: usize) -> Image {
    // `n` decoded bytes: base64 in whole groups of 4 characters for 3 bytes.
    Image { media_type: "image/png".into(), data: "A".repeat(n / 3 * 4) }
}

fn budget(vision: bool, per_result: usize, per_turn: usize) -> ImageBudget {
    ImageBudget { vision, per_result, left: per_turn }
}

#[test]
fn images_within_the_bounds_are_shown_and_the_rest_are_notes_naming_the_setting() {
    let mut b = budget(true, 3000, 5000);
    let (text, shown) = b.admit(ToolOutput { text: "two shots".into(), images: vec![image(1500), image(1500)] });
    assert_eq!((text.as_str(), shown.len()), ("two shots", 2));
    // 3,000 bytes of the turn's 5,000 are spent; a result of 1,500 + 1,500 now gets one.
    let (text, shown) = b.admit(ToolOutput { text: String::new(), images: vec![image(1500), image(1500)] });
    assert_eq!(shown.len(), 1);
    assert_eq!(text, "[image: image/png, 1.4 KiB; not shown: this turn's images are over tools.max_turn_image_bytes]");
    // One image over the per-result bound is a note however much the turn has left.
    let mut b = budget(true, 1000, 1 << 20);
    let (text, shown) = b.admit(ToolOutput { text: "big".into(), images: vec![image(3000)] });
    assert!(shown.is_empty());
    assert_eq!(
        text,
        "big\n[image: image/png, 2.9 KiB; not shown: over tools.max_image_bytes (1000 B per tool result)]"
    );
    // A text-only model gets notes only, and spends nothing.
    let mut b = budget(false, 1 << 20, 1 << 20);
    let (text, shown) = b.admit(ToolOutput { text: String::new(), images: vec![image(30)] });
    assert!(shown.is_empty());
    assert_eq!(text, "[image: image/png, 30 B; not shown: the model takes text only (model.vision = false)]");
    assert_eq!(b.left, 1 << 20);
}

#[test]
fn the_bounds_come_from_the_settings() {
    let llm = FakeLlm::start(vec![]);
    let (_dir, app) =
        app(&llm, "anthropic", &[("tools.max_image_bytes", "2048"), ("tools.max_turn_image_bytes", "4096")]);
    assert_eq!(ImageBudget::for_turn(&app.base.cfg), budget(true, 2048, 4096));
    let (_dir, app) = self::app(&llm, "openai", &[("model.vision", "false")]);
    assert_eq!(ImageBudget::for_turn(&app.base.cfg), budget(false, 1 << 20, 4 << 20));
}

#[test]
fn the_image_types_are_known_by_their_first_bytes() {
    assert_eq!(sniff(PNG), Some("image/png"));
    assert_eq!(sniff(b"\xff\xd8\xff\xe0rest"), Some("image/jpeg"));
    assert_eq!(sniff(b"GIF89a"), Some("image/gif"));
    assert_eq!(sniff(b"RIFF\0\0\0\0WEBPVP8 "), Some("image/webp"));
    assert_eq!(sniff(b"RIFF\0\0\0\0WAVEfmt "), None, "a WAV file is RIFF too");
    assert_eq!(sniff(b"<svg/>"), None);
    assert_eq!(sniff(b""), None);
}

#[tokio::test]
async fn describe_image_asks_the_model_with_the_image_in_either_wire_format() {
    for provider in ["anthropic", "openai"] {
        let llm = FakeLlm::start(vec![Step::text("  A tiny red square.  ")]);
        let (_dir, app) = app(&llm, provider, &[]);
        let said = describe_image(&app.provider, &app.base.cfg, PNG, "image/png", "What is this?").await.unwrap();
        assert_eq!(said, "A tiny red square.");
        let reqs = llm.requests();
        assert_eq!(reqs.len(), 1);
        let body: &Value = reqs[0].json.as_ref().unwrap();
        let data = base64::engine::general_purpose::STANDARD.encode(PNG);
        let last = body["messages"].as_array().unwrap().last().unwrap().clone();
        let expected = if provider == "openai" {
            json!({"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": format!("data:image/png;base64,{data}")}},
                {"type": "text", "text": "What is this?"}
            ]})
        } else {
            json!({"role": "user", "content": [
                {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}},
                {"type": "text", "text": "What is this?"}
            ]})
        };
        assert_eq!(last, expected, "{provider}");
        assert!(body.get("tools").is_none(), "{provider}: no tools for a one-shot question");
    }
}

#[tokio::test]
async fn describe_image_refuses_what_it_cannot_send_without_calling_the_model() {
    let llm = FakeLlm::start(vec![]);
    let (_dir, app) = app(&llm, "anthropic", &[("tools.max_image_bytes", "1024")]);
    let ask = |bytes: Vec<u8>, mime: &'static str, q: String| {
        let app = &app;
        async move { describe_image(&app.provider, &app.base.cfg, &bytes, mime, &q).await.unwrap_err() }
    };
    let q = || "What is it?".to_owned();
    let e = ask(b"%PDF-1.7".to_vec(), "", q()).await;
    assert!(e.to_string().contains("not a PNG, JPEG, GIF or WebP"), "{e}");
    let e = ask(PNG.to_vec(), "image/jpeg", q()).await;
    assert_eq!(e.to_string(), "The image was said to be image/jpeg, but its bytes are image/png.");
    let mut big = PNG.to_vec();
    big.resize(4096, 0);
    let e = ask(big, "image/png", q()).await;
    assert!(e.to_string().contains("4.0 KiB") && e.to_string().contains("tools.max_image_bytes"), "{e}");
    let e = ask(PNG.to_vec(), "", "  ".to_owned()).await;
    assert!(matches!(e, VisionError::Refused(_)), "{e}");
    let e = ask(PNG.to_vec(), "", "?".repeat(MAX_QUESTION_BYTES + 1)).await;
    assert!(matches!(e, VisionError::Refused(_)), "{e}");
    let (_d, off) = self::app(&llm, "anthropic", &[("model.vision", "false")]);
    let e = describe_image(&off.provider, &off.base.cfg, PNG, "", "What?").await.unwrap_err();
    assert!(e.to_string().contains("model.vision"), "{e}");
    assert!(llm.requests().is_empty(), "nothing refused reached the model");
}

#[tokio::test]
async fn a_model_failure_or_an_empty_answer_is_an_error_for_the_caller() {
    let llm = FakeLlm::start(vec![Step::status(500), Step::text("   ")]);
    let (_dir, app) = app(&llm, "anthropic", &[]);
    let e = describe_image(&app.provider, &app.base.cfg, PNG, "", "What?").await.unwrap_err();
    assert!(matches!(e, VisionError::Model(_)), "{e}");
    let e = describe_image(&app.provider, &app.base.cfg, PNG, "", "What?").await.unwrap_err();
    assert_eq!(e, VisionError::Model("The model gave an empty answer about the image.".into()));
}
