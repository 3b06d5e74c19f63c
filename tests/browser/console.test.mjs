// The console a person uses daily, in headless Chromium: the setup form's provider defaults and
// test call, remembered entries, the Config tab's help and checks, the Jobs tab's actions, and
// the layout on a phone. Hostile text (entries, job names, keys) must stay text. Screenshots of
// every tab at 1280 and 390 px wide land in target/browser-screenshots/ (CI keeps target/).

import assert from "node:assert/strict";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { after, test } from "node:test";

import {
  device, freePort, getJson, launchBrowser, startChela, startFakeLlm, stopAll, watchPage, workspaceWith,
} from "./harness.mjs";
import { withConsole } from "./session.mjs";

after(stopAll);

const SHOTS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../target/browser-screenshots");
const HOSTILE = '<img src=x onerror="window.hit=1">';

test("setup form: OpenAI-compatible takes its own defaults; a refused key saves nothing; the answer is shown", { timeout: 120_000 }, async () => {
  const key = "sk-browser-setup-test";
  const fake = await startFakeLlm([], key);
  const port = await freePort();
  const ws = await workspaceWith(port, []);
  const chela = await startChela(ws, port);
  await withConsole(chela, {}, async ({ page, problems }) => {
    await page.getByRole("heading", { name: "Set up Chela" }).waitFor();
    const url = page.getByLabel("Base URL"), model = page.getByLabel("Model");
    assert.equal(await url.inputValue(), "https://api.anthropic.com");
    await page.getByLabel("Provider").selectOption("openai");
    assert.deepEqual([await url.inputValue(), await model.inputValue()], ["https://api.openai.com/v1", "gpt-4.1-mini"]);
    await page.getByLabel("Provider").selectOption("anthropic");
    assert.deepEqual([await url.inputValue(), await model.inputValue()], ["https://api.anthropic.com", "claude-sonnet-4-5"]);
    // What the person typed is theirs: switching keeps it.
    await model.fill("my-own-model");
    await page.getByLabel("Provider").selectOption("openai");
    assert.equal(await model.inputValue(), "my-own-model");
    await page.getByLabel("Provider").selectOption("anthropic");

    // A wrong key: the provider's refusal is shown, and nothing is saved.
    await url.fill(fake.url);
    await model.fill("fake-model");
    await page.getByLabel("API key").fill("sk-wrong");
    await page.getByRole("button", { name: "Save and start chatting" }).click();
    await page.locator("#setup-error", { hasText: "Not saved" }).waitFor();
    assert.match(await page.locator("#setup-error").innerText(), /key|401|rejected/i);
    assert.equal((await getJson(chela.base, "/api/setup")).needs_setup, true);
    await assert.rejects(readFile(path.join(ws, "overrides.toml"), "utf8").then((t) => {
      if (!t.includes(fake.url)) throw new Error("not saved");
    }));

    // The right key: the provider's own answer is shown, then the settings are saved.
    await page.getByLabel("API key").fill(key);
    await page.getByRole("button", { name: "Save and start chatting" }).click();
    await page.locator("#toast", { hasText: "answered with model fake-model" }).waitFor();
    assert.match(await page.locator("#toast").innerText(), /You said: Reply with one word: ready/);
    await page.locator('#conn[data-state="open"]').waitFor();
    assert.equal((await getJson(chela.base, "/api/setup")).needs_setup, false);
    assert.ok((await readFile(path.join(ws, "overrides.toml"), "utf8")).includes(fake.url));
    // The refused test call's 502 is the one failed request, and the page expected it.
    assert.deepEqual(problems.filter((p) => !/status of 502/.test(p)), []);
  });
});

test("memory, config and jobs tabs edit what they show; hostile text stays text; the layout holds at 390 px", { timeout: 120_000 }, async () => {
  const port = await freePort();
  // A model is configured (so the page opens on its tabs) but never called.
  const ws = await workspaceWith(port, [
    'provider = "anthropic"', 'base_url = "http://127.0.0.1:9"', 'model = "fake-model"', 'api_key = "sk-browser-console"',
  ]);
  await mkdir(path.join(ws, "memory"), { recursive: true });
  const entry = (id, content, at) => JSON.stringify({ id, content, tags: ["t"], source: "test", created: at, updated: at });
  await writeFile(path.join(ws, "memory", "entries.jsonl"), [
    entry("m1", "Ana drinks her coffee black", 1_800_000_000),
    entry("m2", "The dog is called Pip", 1_800_000_100),
    entry("m3", HOSTILE + " likes <b>tea</b>", 1_800_000_200),
  ].join("\n") + "\n");
  await writeFile(path.join(ws, "cron.json"), JSON.stringify({ version: 1, jobs: [{
    id: "standup", name: HOSTILE, trigger: { type: "cron", expr: "0 16 * * 1-5", tz: "Europe/Paris" },
    action: { type: "cap", name: "get_current_time" },
  }] }));
  const chela = await startChela(ws, port);
  const pending = await device(chela.base, "aa:bb:cc:dd:ee:07", "");
  assert.equal(pending.status, 200, JSON.stringify(pending.json));
  const before = (page) => page.on("dialog", (d) => d.accept());
  await withConsole(chela, { before }, async ({ page, problems }) => {
    // Memory: the entries, searched, edited and forgotten.
    await page.getByRole("tab", { name: "Memory" }).click();
    const entries = page.getByRole("table", { name: "Remembered entries" });
    await entries.getByRole("row").filter({ hasText: "Pip" }).waitFor();
    assert.equal(await page.locator("#entries-count").innerText(), "3 entries.");
    await page.getByLabel("Search memory").fill("coffee");
    await page.locator("#entries-count", { hasText: "1 entry match." }).waitFor();
    assert.equal(await entries.getByRole("row").filter({ hasText: "Pip" }).count(), 0);
    await page.getByRole("button", { name: "Edit entry m1" }).click();
    await page.getByLabel("Text of entry m1").fill("Ana drinks oat flat whites");
    await page.getByRole("button", { name: "Save entry m1" }).click();
    // The row is redrawn from the server's answer, so the edit box goes only once the file is
    // written (while it is open, its text is part of the cell's name).
    await page.getByLabel("Text of entry m1").waitFor({ state: "detached" });
    await entries.getByRole("cell", { name: "Ana drinks oat flat whites" }).waitFor();
    const file = () => readFile(path.join(ws, "memory", "entries.jsonl"), "utf8");
    assert.ok((await file()).includes("oat flat whites") && !(await file()).includes("coffee black"));
    await page.getByLabel("Search memory").fill("");
    await page.locator("#entries-count", { hasText: "3 entries." }).waitFor();
    await page.getByRole("button", { name: "Forget entry m2" }).click();
    await page.locator("#entries-count", { hasText: "2 entries." }).waitFor();
    assert.ok(!(await file()).includes("Pip"));
    // Hostile entry text is shown as the text it is.
    assert.equal(await entries.getByRole("row").filter({ hasText: "likes" }).getByRole("cell").first().innerText(), HOSTILE + " likes <b>tea</b>");

    // Config: grouped, with help; checked as typed; a typo gets one suggestion.
    await page.getByRole("tab", { name: "Config" }).click();
    const settings = page.getByRole("table", { name: "Settings" });
    await settings.getByRole("rowheader", { name: "[llm]" }).or(settings.locator("tr.section", { hasText: "[llm]" })).first().waitFor();
    const modelRow = settings.getByRole("row").filter({ has: page.locator("code", { hasText: /^llm\.model$/ }) });
    assert.ok((await modelRow.locator(".help").innerText()).length > 10, "llm.model has its help text");
    await page.getByLabel("Key", { exact: true }).fill("llm.modle");
    const check = page.locator("#config-check");
    await check.getByRole("button", { name: "llm.model" }).waitFor();
    assert.equal(await check.getByRole("button").count(), 1, "one suggestion");
    assert.ok(!(await check.innerText()).includes("llm.provider"), await check.innerText());
    await check.getByRole("button", { name: "llm.model" }).click();
    assert.equal(await page.getByLabel("Key", { exact: true }).inputValue(), "llm.model");
    await page.getByLabel("Key", { exact: true }).fill("llm.max_tokens");
    await page.getByLabel("Value", { exact: true }).fill("-5");
    await check.locator(".danger, :scope.danger").or(page.locator("#config-check.danger")).first().waitFor();
    assert.match(await check.innerText(), /llm\.max_tokens/);
    await page.getByLabel("Value", { exact: true }).fill("2048");
    await page.locator("#config-check:not(.danger)", { hasText: "Valid." }).waitFor();
    await page.getByLabel("Key", { exact: true }).fill(HOSTILE);
    await page.locator("#config-check.danger", { hasText: "unknown config key" }).waitFor();
    assert.ok((await check.innerText()).includes(HOSTILE), await check.innerText());

    // Jobs: the trigger in words; pause, resume, run now, delete.
    await page.getByRole("tab", { name: "Jobs" }).click();
    const jobs = page.getByRole("table", { name: "Scheduled jobs" });
    const standup = jobs.getByRole("row").filter({ hasText: "standup" });
    await standup.waitFor();
    const cells = await standup.getByRole("cell").allInnerTexts();
    assert.equal(cells[3], "every weekday at 16:00 Europe/Paris");
    assert.ok(cells[0].includes(HOSTILE), cells[0]);
    await page.getByRole("button", { name: "Pause job standup" }).click();
    await standup.getByRole("cell", { name: "paused", exact: true }).waitFor();
    await page.getByRole("button", { name: "Resume job standup" }).click();
    await standup.getByRole("cell", { name: "active", exact: true }).waitFor();
    await page.getByRole("button", { name: "Run now job standup" }).click();
    // The run ends on the daemon's own time: the tab, read again, shows its outcome (bounded).
    const ran = standup.getByRole("cell", { name: /^ran by hand at / });
    for (let i = 0; i < 30 && !(await ran.count()); i++) {
      await page.getByRole("tab", { name: "Jobs" }).click();
      await ran.waitFor({ timeout: 500 }).catch(() => {});
    }
    await ran.waitFor();

    // The layout, at both widths: no backtick in any tab's text, tables scroll inside their
    // card (the page never sideways), and the Devices card's buttons show whole.
    await mkdir(SHOTS, { recursive: true });
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 900 });
      for (const tab of ["Status", "Chat", "Memory", "Config", "Jobs", "Devices", "Pairing", "Sessions", "Capabilities", "Usage"]) {
        await page.getByRole("tab", { name: tab }).click();
        const panel = page.locator("section[role=tabpanel]:not([hidden])");
        if (tab === "Devices") await page.getByRole("button", { name: /^Approve device/ }).waitFor();
        if (tab === "Jobs") await standup.waitFor();
        await page.waitForLoadState("networkidle");
        assert.ok(!(await page.locator("body").innerText()).includes("`"), `a backtick on the ${tab} tab at ${width} px`);
        const layout = await panel.evaluate((p) => ({
          pageScroll: document.documentElement.scrollWidth - document.documentElement.clientWidth,
          tables: [...p.querySelectorAll("table")].map((t) => getComputedStyle(t.parentElement).overflowX),
          buttons: [...p.querySelectorAll("td button")].map((b) => {
            const r = b.getBoundingClientRect(), c = b.closest("td").getBoundingClientRect();
            return { text: b.textContent, whole: b.scrollWidth <= b.clientWidth + 1 && r.left >= c.left - 1 && r.right <= c.right + 1 };
          }),
        }));
        assert.equal(layout.pageScroll, 0, `the ${tab} tab scrolls sideways at ${width} px`);
        assert.ok(layout.tables.every((o) => o === "auto"), `${tab}: ${layout.tables}`);
        for (const b of layout.buttons) assert.ok(b.whole, `${tab} at ${width} px: the ${b.text} button is cut`);
        await page.screenshot({ path: path.join(SHOTS, `${tab.toLowerCase()}-${width}.png`), fullPage: true });
      }
    }
    assert.equal(await page.locator("main img, main script, main svg").count(), 0);
    assert.equal(await page.evaluate(() => window.hit), undefined);

    await page.getByRole("tab", { name: "Jobs" }).click();
    await page.getByRole("button", { name: "Delete job standup" }).click();
    await jobs.getByRole("cell", { name: "No scheduled jobs." }).waitFor();
    assert.deepEqual((await getJson(chela.base, "/api/scheduler/jobs")).jobs, []);
    assert.deepEqual(problems, []);
  });
});

test("the usage tab shows a scripted turn's tokens and estimated cost per model and per chat, with the price's source", { timeout: 120_000 }, async () => {
  const key = "sk-browser-usage";
  const fake = await startFakeLlm([{ text: "Counted." }], key);
  const port = await freePort();
  // A model the built-in price table knows ($1 in, $5 out per million tokens).
  const ws = await workspaceWith(port, [
    'provider = "anthropic"', `base_url = "${fake.url}"`, 'model = "claude-haiku-4-5"', `api_key = "${key}"`,
  ]);
  const chela = await startChela(ws, port);
  await withConsole(chela, {}, async ({ page, problems }) => {
    await page.getByRole("tab", { name: "Usage" }).click();
    const today = page.locator('[data-period="today"]');
    await today.getByRole("cell", { name: "No turns." }).first().waitFor();

    await page.getByRole("tab", { name: "Chat" }).click();
    await page.getByLabel("Message").fill("count my tokens");
    await page.getByRole("button", { name: "Send" }).click();
    await page.getByRole("log", { name: "Conversation" }).locator(".msg.assistant", { hasText: "Counted." }).waitFor();
    // What the turn recorded, as `chela usage` reads it: the figures the tab must show.
    const line = (await readFile(path.join(ws, "state", "usage.jsonl"), "utf8")).trim().split("\n");
    assert.equal(line.length, 1, line.join("\n"));
    const r = JSON.parse(line[0]);
    assert.ok(r.in > 0 && r.out > 0, line[0]);
    const n = (v) => v.toLocaleString("en-US");
    const cost = "$" + ((r.in * 1 + r.cache_read * 0.1 + r.cache_write * 1.25 + r.out * 5) / 1e6).toFixed(4);
    const cells = ["1", n(r.in), n(r.cache_read), n(r.cache_write), n(r.out), cost];

    await page.getByRole("tab", { name: "Usage" }).click();
    for (const period of ["today", "week"]) {
      const p = page.locator(`[data-period="${period}"]`);
      const model = p.locator('tr[data-model="claude-haiku-4-5"] td');
      await model.first().waitFor();
      assert.deepEqual(await model.allInnerTexts(), ["claude-haiku-4-5", ...cells], period);
      const chat = await p.locator("tr[data-chat] td").allInnerTexts();
      assert.deepEqual(chat, [`${r.channel}:${r.chat}`, ...cells], period);
      assert.match(await p.locator("h3").innerText(), new RegExp(`1 turn\\(s\\), \\${cost}`));
    }
    const price = await page.locator('tr[data-price="claude-haiku-4-5"] td').allInnerTexts();
    assert.deepEqual(price, ["claude-haiku-4-5", "built-in (claude-haiku-4-5)", "$1", "$0.1", "$1.25", "$5"]);
    assert.match(await page.locator("#usage-prices-note").innerText(), /llm\.prices/);
    assert.deepEqual(problems, []);
  });
});

test("a tab chosen while the login link's code is being traded opens once the session exists, with no token prompt", { timeout: 120_000 }, async () => {
  const port = await freePort();
  // A model is configured (so the page opens on its tabs) but never called.
  const ws = await workspaceWith(port, [
    'provider = "anthropic"', 'base_url = "http://127.0.0.1:9"', 'model = "fake-model"', 'api_key = "sk-browser-early-tab"',
  ]);
  await mkdir(path.join(ws, "memory"), { recursive: true });
  const at = 1_800_000_000;
  await writeFile(path.join(ws, "memory", "entries.jsonl"),
    JSON.stringify({ id: "m1", content: "The dog is called Pip", tags: [], source: "test", created: at, updated: at }) + "\n");
  const chela = await startChela(ws, port);
  // Not `withConsole`: it waits for the session, and this test acts before there is one.
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage();
    const problems = watchPage(page);
    // The trade's request is held until the tab has been chosen: the page is, for as long as the
    // test needs, where a slow gateway would leave it.
    let reached, release;
    const trading = new Promise((r) => { reached = r; });
    const released = new Promise((r) => { release = r; });
    await page.route("**/api/login", async (route) => {
      reached();
      await released;
      await route.continue();
    });
    await page.goto(chela.login);
    await trading;
    await page.getByRole("tab", { name: "Memory" }).click();
    release();

    await page.locator('#conn[data-state="open"]').waitFor();
    await page.getByRole("table", { name: "Remembered entries" }).getByRole("row").filter({ hasText: "Pip" }).waitFor();
    assert.equal(await page.getByRole("tab", { name: "Memory" }).getAttribute("aria-selected"), "true");
    assert.equal(await page.locator("#token").isHidden(), true, "the token prompt is showing");
    // Without the session a tab's request is refused (401): none was made.
    assert.deepEqual(problems, []);
  } catch (e) {
    e.message += `\n--- chela run said:\n${chela.log.text}`;
    throw e;
  } finally {
    await browser.close();
  }
});
