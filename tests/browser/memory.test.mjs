// The console's Memory tab searches through the memory index, as the model's memory_recall and
// memory_search do: the index's ranking (a misspelled word still finds its entry), the note
// passages (file, lines, snippet) next to the entries, and hostile note text kept as text.

import assert from "node:assert/strict";
import { mkdir, writeFile } from "node:fs/promises";
import path from "node:path";
import { after, test } from "node:test";

import { freePort, startChela, stopAll, workspaceWith } from "./harness.mjs";
import { withConsole } from "./session.mjs";

after(stopAll);

const HOSTILE = '<img src=x onerror="window.hit=1">';

test("memory tab: one search finds entries by the index's ranking and the notes' passages", { timeout: 120_000 }, async () => {
  const port = await freePort();
  // A model is configured (so the page opens on its tabs) but never called.
  const ws = await workspaceWith(port, [
    'provider = "anthropic"', 'base_url = "http://127.0.0.1:9"', 'model = "fake-model"', 'api_key = "sk-browser-memory"',
  ]);
  await mkdir(path.join(ws, "memory"), { recursive: true });
  const entry = (id, content, at) => JSON.stringify({ id, content, tags: [], source: "test", created: at, updated: at });
  await writeFile(path.join(ws, "memory", "entries.jsonl"), [
    entry("m1", "The needle is a green kiwi", 1_800_000_000),
    entry("m2", "The dog is called Pip", 1_800_000_100),
    entry("m3", "Ana planted roses by the kiwi vine", 1_800_000_200),
  ].join("\n") + "\n");
  await writeFile(path.join(ws, "memory", "2024-07-14.md"),
    "# 2024-07-14\n\n- 09:00 Bought bread\n- 18:00 Planted the walnut sapling by the gate " + HOSTILE + "\n");
  const chela = await startChela(ws, port);
  await withConsole(chela, {}, async ({ page, problems }) => {
    await page.getByRole("tab", { name: "Memory" }).click();
    const entries = page.getByRole("table", { name: "Remembered entries" });
    await entries.getByRole("row").filter({ hasText: "Pip" }).waitFor();
    const notes = page.getByRole("table", { name: "In your notes" });
    assert.equal(await page.locator("#notes-found").isHidden(), true, "no search, no notes");

    // Misspelled: "kiwii" and "neddle" match no word; the index offers the words one edit away,
    // and BM25 puts the entry holding both first.
    await page.getByLabel("Search memory").fill("neddle kiwii");
    await page.locator("#entries-count", { hasText: "1 entry match." }).waitFor();
    const first = entries.locator("tbody tr").first();
    assert.equal(await first.getAttribute("data-entry"), "m1");
    assert.equal(await entries.getByRole("row").filter({ hasText: "Pip" }).count(), 0);

    // A note passage: its file and lines, its text shown as text.
    await page.getByLabel("Search memory").fill("walnut sapling");
    const passage = notes.getByRole("row").filter({ hasText: "walnut" });
    await passage.waitFor();
    const cells = await passage.getByRole("cell").allInnerTexts();
    assert.equal(cells[0], "memory/2024-07-14.md:4");
    assert.ok(cells[1].includes("Planted the walnut sapling by the gate " + HOSTILE), cells[1]);
    assert.equal(await page.evaluate(() => window.hit), undefined);
    await page.locator("#entries-count", { hasText: "0 entries match." }).waitFor();

    // One search, both kinds: an entry and a note passage.
    await writeFile(path.join(ws, "MEMORY.md"), "# About me\n\nMy kiwi vine came from Ana.\n");
    await page.getByLabel("Search memory").fill("kiwi vine");
    await notes.getByRole("row").filter({ hasText: "MEMORY.md:3" }).waitFor();
    assert.equal(await entries.locator("tbody tr").first().getAttribute("data-entry"), "m3");

    await page.getByLabel("Search memory").fill("");
    await page.locator("#entries-count", { hasText: "3 entries." }).waitFor();
    assert.equal(await page.locator("#notes-found").isHidden(), true);
    assert.deepEqual(problems, []);
  });
});
