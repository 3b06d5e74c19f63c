//! Reading a peer's tool list, and reading it again when the peer says it changed: one copy for
//! every MCP peer (configured servers over stdio or HTTP, xiaozhi devices, endpoint hosts),
//! each with its own bounds.
//!
//! [`list_tools`] follows `nextCursor` page by page within [`Bounds`]: a cursor handed back
//! again (or an empty one) ends the listing, a tool named twice is kept once, long descriptions
//! are cut and tools with a huge schema left out. The ids come from the peer's [`Names`],
//! updated only when the listing succeeds and then holding only the listed tools, so a peer
//! whose tools keep changing cannot grow it.
//!
//! [`follow_changes`] is the loop behind `notifications/tools/list_changed`: one re-list at a
//! time per peer, signals that arrive meanwhile fold into one more (the signal is a
//! [`tokio::sync::Notify`] permit), and at most one re-list per [`RELIST_GAP`], so a peer that
//! sends the notification endlessly costs one listing a second and nothing more.

use std::collections::HashSet;
use std::future::Future;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use chela_core::cap::Capability;

use super::names::Names;
use super::wire::ToolDef;
use crate::tools::{Dynamic, Group};

/// The shortest time between two listings of one peer caused by `list_changed`.
pub const RELIST_GAP: Duration = Duration::from_secs(1);

/// How much of a peer's tool list is read.
#[derive(Clone, Copy, Debug)]
pub struct Bounds {
    /// Most `tools/list` pages.
    pub pages: usize,
    /// Most tools.
    pub tools: usize,
    /// Longest description kept (characters).
    pub description: usize,
    /// Largest input schema (bytes); a tool with a larger one is left out.
    pub schema: usize,
}

/// The capability group of a peer's listed tools: `group`, described by `description`, one
/// model-callable capability per `(id, tool)`, each run by the handle `tool` makes for it.
pub(crate) fn group_of(
    group: &str,
    description: String,
    tools: &[(String, ToolDef)],
    tool: impl Fn(&ToolDef) -> Arc<dyn Dynamic>,
) -> Group {
    let mut out = Group::new(group.to_owned(), description);
    for (id, t) in tools {
        let cap = Capability {
            id: id.clone().into(),
            group: group.to_owned().into(),
            description: t.description.clone().into(),
            input_schema: t.schema.clone().into(),
            llm_callable: true,
        };
        out = out.with_dynamic(cap, tool(t));
    }
    out
}

/// Every page of a peer's tool list within `bounds`, each tool with its id (`prefix` + its
/// mapped name, see [`Names::insert_in`]). `page(cursor)` asks the peer for one page (`None`:
/// the first) and returns its tools and the next cursor; its error ends the listing. `label`
/// names the peer in the log.
pub async fn list_tools<F, Fut>(
    label: &str,
    prefix: &str,
    bounds: Bounds,
    names: &Mutex<Names>,
    mut page: F,
) -> Result<Vec<(String, ToolDef)>, String>
where
    F: FnMut(Option<String>) -> Fut,
    Fut: Future<Output = Result<(Vec<ToolDef>, Option<String>), String>>,
{
    let mut ids = names.lock().unwrap_or_else(PoisonError::into_inner).clone();
    let mut out: Vec<(String, ToolDef)> = Vec::new();
    let mut cursor: Option<String> = None;
    let mut pages = 0;
    'pages: loop {
        if pages == bounds.pages {
            chela_log::warn!("{label} has more than {} pages of tools; the rest are left out", bounds.pages);
            break;
        }
        pages += 1;
        let (tools, next) = page(cursor.clone()).await?;
        for mut t in tools {
            // A page that repeats a tool (a cursor pointing back) lists it once.
            if out.iter().any(|(_, o)| o.name == t.name) {
                continue;
            }
            if out.len() >= bounds.tools {
                chela_log::warn!("{label} offers more than {} tools; the rest are left out", bounds.tools);
                break 'pages;
            }
            if t.schema.len() > bounds.schema {
                chela_log::warn!("{label}: tool {} has an input schema over {} bytes; left out", t.name, bounds.schema);
                continue;
            }
            if let Some((i, _)) = t.description.char_indices().nth(bounds.description) {
                t.description.truncate(i);
            }
            let id = ids.insert_in(prefix, &t.name);
            out.push((id, t));
        }
        match next {
            // A cursor handed back again (or an empty one) would loop forever.
            Some(n) if !n.is_empty() && Some(&n) != cursor.as_ref() => cursor = Some(n),
            _ => break,
        }
    }
    ids.keep_only(&out.iter().map(|(id, _)| id.as_str()).collect::<HashSet<_>>());
    *names.lock().unwrap_or_else(PoisonError::into_inner) = ids;
    Ok(out)
}

/// Re-lists a peer whenever it says its tools changed, until it goes: waits for `changed()`,
/// keeps [`RELIST_GAP`] after the previous re-list, then awaits `relist()` (which lists and
/// replaces the group; `false` ends the loop). Returns when `closed` completes.
pub async fn follow_changes<C, CF, R, RF>(mut changed: C, closed: impl Future<Output = ()>, mut relist: R)
where
    C: FnMut() -> CF,
    CF: Future<Output = ()>,
    R: FnMut() -> RF,
    RF: Future<Output = bool>,
{
    tokio::pin!(closed);
    let mut last: Option<tokio::time::Instant> = None;
    loop {
        tokio::select! {
            () = changed() => {}
            () = &mut closed => return,
        }
        if let Some(at) = last {
            tokio::select! {
                () = tokio::time::sleep_until(at + RELIST_GAP) => {}
                () = &mut closed => return,
            }
        }
        last = Some(tokio::time::Instant::now());
        tokio::select! {
            go_on = relist() => if !go_on { return },
            () = &mut closed => return,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::sync::Notify;

    use super::*;

    fn def(name: &str) -> ToolDef {
        ToolDef { name: name.into(), description: "d".repeat(10), schema: "{}".into() }
    }

    const WIDE: Bounds = Bounds { pages: 8, tools: 8, description: 4, schema: 16 };

    #[tokio::test]
    async fn pages_are_followed_within_the_bounds() {
        let names = Mutex::new(Names::default());
        // Three pages of two; the descriptions are cut to 4 characters.
        let got = list_tools("p", "g", WIDE, &names, |c| async move {
            Ok(match c.as_deref() {
                None => (vec![def("a"), def("b")], Some("2".into())),
                Some("2") => (vec![def("c"), def("a")], Some("3".into())),
                _ => (vec![def("d")], None),
            })
        })
        .await
        .unwrap();
        let ids: Vec<&str> = got.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["g_a", "g_b", "g_c", "g_d"], "a repeated tool is listed once");
        assert_eq!(got[0].1.description, "dddd");
        // A peer that hands back the same cursor is read no further; nor one past the page bound.
        let calls = AtomicUsize::new(0);
        let got = list_tools("p", "g", Bounds { pages: 3, ..WIDE }, &names, |_| {
            calls.fetch_add(1, Ordering::Relaxed);
            let n = calls.load(Ordering::Relaxed);
            async move { Ok((vec![def(&format!("t{n}"))], Some(format!("c{}", n.min(2))))) }
        })
        .await
        .unwrap();
        assert_eq!(got.len(), 3, "page 3 repeats page 2's cursor: it is the last");
        assert_eq!(calls.load(Ordering::Relaxed), 3);
        let got = list_tools("p", "g", Bounds { pages: 3, ..WIDE }, &names, |c| async move {
            Ok((
                vec![def(&format!("x{}", c.as_deref().unwrap_or("").len()))],
                Some(format!("{}.", c.unwrap_or_default())),
            ))
        })
        .await
        .unwrap();
        assert_eq!(got.len(), 3, "at most 3 pages");
        // Too many tools, too large a schema.
        let got = list_tools("p", "g", Bounds { tools: 3, ..WIDE }, &names, |_| async {
            let mut big = def("big");
            big.schema = "x".repeat(17);
            Ok((vec![big, def("1"), def("2"), def("3"), def("4")], None))
        })
        .await
        .unwrap();
        let ids: Vec<&str> = got.iter().map(|(id, _)| id.as_str()).collect();
        assert_eq!(ids, ["g_1", "g_2", "g_3"]);
    }

    #[tokio::test]
    async fn the_names_hold_only_the_last_good_listing() {
        let names = Mutex::new(Names::default());
        for round in 0..50 {
            list_tools("p", "g", WIDE, &names, |_| async move {
                Ok(((0..8).map(|i| def(&format!("r{round}_{i}"))).collect(), None))
            })
            .await
            .unwrap();
        }
        assert_eq!(names.lock().unwrap().known(), 8, "ids of tools gone are forgotten");
        // A failed listing changes nothing.
        let e = list_tools("p", "g", WIDE, &names, |c| async move {
            match c {
                None => Ok((vec![def("new")], Some("2".into()))),
                Some(_) => Err("the peer left".to_owned()),
            }
        })
        .await
        .unwrap_err();
        assert_eq!(e, "the peer left");
        assert_eq!(names.lock().unwrap().original("g_r49_0"), Some("r49_0"));
        assert_eq!(names.lock().unwrap().original("g_new"), None);
    }

    #[tokio::test(start_paused = true)]
    async fn a_flood_of_changes_costs_one_relist_per_gap() {
        let signal = Arc::new(Notify::new());
        let relists = Arc::new(AtomicUsize::new(0));
        let closed = Arc::new(Notify::new());
        let (s, r, c) = (Arc::clone(&signal), Arc::clone(&relists), Arc::clone(&closed));
        let follower = tokio::spawn(async move {
            follow_changes(
                || s.notified(),
                c.notified(),
                || {
                    r.fetch_add(1, Ordering::Relaxed);
                    // A listing takes a while; signals meanwhile fold into one.
                    async {
                        tokio::time::sleep(Duration::from_millis(300)).await;
                        true
                    }
                },
            )
            .await
        });
        // 10 s of notifications, 1000 a second.
        for _ in 0..10_000 {
            signal.notify_one();
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
        let n = relists.load(Ordering::Relaxed);
        assert!((9..=11).contains(&n), "{n} re-lists in 10 s");
        // One more change after the flood is still picked up.
        tokio::time::sleep(Duration::from_secs(5)).await;
        let before = relists.load(Ordering::Relaxed);
        signal.notify_one();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(relists.load(Ordering::Relaxed), before + 1, "a quiet peer is re-listed at once");
        closed.notify_one();
        tokio::time::timeout(Duration::from_secs(1), follower).await.expect("the loop ends with the peer").unwrap();
    }
}
