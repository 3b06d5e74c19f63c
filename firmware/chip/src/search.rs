//! `web_search` on the chip: the core's contract (`chela_core::contract::web`, the host's
//! requests and parsing) over the board's [`Link`], with the chip's budget: at most
//! [`MAX_ANSWER`] bytes of the engine's answer are read, and the model gets at most
//! [`MAX_TEXT`] bytes of results. Tavily when its key is set (`set_tavily_key`), else Brave
//! Search (`set_search_key`); offered only when one of them is.

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use chela_core::console::{ChipConfig, Field};
use chela_core::contract::Args;
use chela_core::contract::web::{self, SearchArgs};
use chela_core::exchange::Head;
use chela_proto::chat::ToolSpec;

use crate::link::{Collected, Link, LinkError};

/// The tool, as the contract gives it.
pub const SPECS: [ToolSpec<'static>; 1] = [web::SEARCH];

pub const TAVILY_URL: &str = "https://api.tavily.com";
pub const BRAVE_URL: &str = "https://api.search.brave.com";

/// The most of an engine's answer read: five Tavily results are about 5 KB.
pub const MAX_ANSWER: usize = 12 * 1024;
/// The most text the model gets from one search.
pub const MAX_TEXT: usize = 2048;
/// The longest snippet kept per result.
pub const MAX_SNIPPET: usize = 300;
/// Results asked for unless the model asks for fewer; more would not fit [`MAX_TEXT`].
pub const MAX_RESULTS: usize = 5;

/// Web search as the turn driver takes it: a type, so a build without it (`Off`) links none
/// of its code.
#[allow(async_fn_in_trait)] // used with concrete types only; no Send bound wanted on one core
pub trait Search<L: Link> {
    /// Whether `web_search` is offered to the model.
    fn offered(&self, config: &ChipConfig) -> bool;
    /// Runs one call; only called when [`offered`](Search::offered).
    async fn run(&mut self, config: &ChipConfig, link: &mut L, input: &str) -> Result<String, String>;
}

/// `web_search` through Tavily or Brave, when a key is set.
pub struct Web;

impl<L: Link> Search<L> for Web {
    fn offered(&self, config: &ChipConfig) -> bool {
        available(config)
    }

    async fn run(&mut self, config: &ChipConfig, link: &mut L, input: &str) -> Result<String, String> {
        run(config, link, input).await
    }
}

/// No web search in this build: never offered.
pub struct Off;

impl<L: Link> Search<L> for Off {
    fn offered(&self, _: &ChipConfig) -> bool {
        false
    }

    async fn run(&mut self, _: &ChipConfig, _: &mut L, _: &str) -> Result<String, String> {
        Err(String::from("There is no tool `web_search` on this device."))
    }
}

/// Whether a search key is set: the tool is offered only then.
pub fn available(config: &ChipConfig) -> bool {
    !config.get(Field::TavilyKey).is_empty() || !config.get(Field::BraveKey).is_empty()
}

/// Runs one `web_search` call with the keys in `config`, through `link`.
pub async fn run<L: Link>(config: &ChipConfig, link: &mut L, input: &str) -> Result<String, String> {
    let args = SearchArgs::parse(input)?;
    let query = args.query.trim();
    if query.is_empty() {
        return Err("The search query is empty.".into());
    }
    let n = args.max_results.unwrap_or(MAX_RESULTS).clamp(1, MAX_RESULTS);
    let (tavily, brave) = (config.get(Field::TavilyKey), config.get(Field::BraveKey));
    let mut answer = Collected::up_to(MAX_ANSWER);
    let engine = if !tavily.is_empty() {
        let head = Head {
            url: format!("{TAVILY_URL}/search"),
            headers: alloc::vec![
                ("authorization", format!("Bearer {tavily}")),
                ("content-type", "application/json".into())
            ],
        };
        let body = web::tavily_body(query, n);
        let mut write = |from: usize, buf: &mut Vec<u8>| {
            buf.clear();
            if let Some(rest) = body.as_bytes().get(from..) {
                buf.extend_from_slice(&rest[..rest.len().min(1024)]);
            }
        };
        link.post(&head, body.len(), &mut write, &mut answer).await.map_err(|e| failed("Tavily", &e))?;
        "Tavily"
    } else if !brave.is_empty() {
        let head = Head {
            url: format!("{BRAVE_URL}{}", web::brave_path(query, n)),
            headers: alloc::vec![("accept", "application/json".into()), ("x-subscription-token", String::from(brave))],
        };
        link.get(&head, &mut answer).await.map_err(|e| failed("Brave Search", &e))?;
        "Brave Search"
    } else {
        return Err("Web search is not set up on this device: set a key on its serial console with set_tavily_key \
                    (Tavily, preferred) or set_search_key (Brave Search)."
            .into());
    };
    if answer.status != 200 {
        return Err(web::status_error(engine, answer.status, &answer.body));
    }
    if answer.over {
        return Err(format!("{engine} sent more than this device reads ({MAX_ANSWER} bytes); ask for fewer results."));
    }
    let hits = if engine == "Tavily" {
        web::parse_tavily(&answer.body, n, MAX_SNIPPET)?
    } else {
        web::parse_brave(&answer.body, n, MAX_SNIPPET)?
    };
    if hits.is_empty() {
        return Ok(format!("No results for \"{}\".", chela_core::text::prefix(query, 200)));
    }
    Ok(web::render(&hits, MAX_TEXT))
}

fn failed(engine: &str, e: &LinkError) -> String {
    format!("{engine} could not be reached: {e}")
}
