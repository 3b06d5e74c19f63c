// The web page in a real browser: headless Debian Chromium loads it from a running `chela run`
// whose model is the scripted fake LLM, and uses it as a person would (by roles and labels).
// Run it with scripts/browser-test.sh, which builds and installs what it needs.

import assert from "node:assert/strict";
import { mkdir, readFile, writeFile } from "node:fs/promises";
import path from "node:path";
import { after, test } from "node:test";

import {
  device, freePort, getJson, runChela, startChela, startFakeLlm, startFakeTelegram, stopAll, workspaceWith,
} from "./harness.mjs";
import { withConsole } from "./session.mjs";

after(stopAll);

test("chat streams the reply with a tool event; a capability group toggles", { timeout: 120_000 }, async () => {
  const key = "sk-browser-chat";
  // First model call: a tool call; second: the answer, streamed in pieces 300 ms apart so the
  // page visibly shows partial text before the final response replaces it.
  const fake = await startFakeLlm([
    { tool_calls: [{ name: "get_current_time", input: {} }], text: "Let me look." },
    { text: "It is **noon** where you are. <b>not markup</b>", chunk_delay_ms: 300 },
  ], key);
  const port = await freePort();
  const ws = await workspaceWith(port, [
    'provider = "anthropic"', `base_url = "${fake.url}"`, 'model = "fake-model"', `api_key = "${key}"`,
  ]);
  const chela = await startChela(ws, port);
  const frames = [];
  const before = (page) => page.on("websocket", (sock) => sock.on("framereceived", (f) => {
    try { frames.push(JSON.parse(f.payload)); } catch { frames.push({ type: "unparsable" }); }
  }));
  await withConsole(chela, { before }, async ({ page, problems }) => {
    assert.ok(!page.url().includes("login="), `the used login code stayed in the address bar: ${page.url()}`);
    await page.getByLabel("Message").fill("What time is it?");
    await page.getByRole("button", { name: "Send" }).click();

    const log = page.getByRole("log", { name: "Conversation" });
    await log.locator(".msg.user", { hasText: "What time is it?" }).waitFor();
    // Streaming: the answer's first pieces are shown while the turn is still running.
    const partial = await page.waitForFunction(() => {
      const body = document.querySelector(".msg.assistant.streaming .body");
      return body && body.textContent.includes("It is") ? body.textContent : null;
    }, null, { polling: 20 });
    assert.ok(!(await partial.jsonValue()).includes("where you are. <b>not markup</b>"),
      "the partial text was already the whole answer: nothing was streamed");

    // The tool event, shown as a chip that went from start to ok.
    await log.getByLabel("tool get_current_time: ok").waitFor();

    // The final response replaces the streamed text and is rendered as Markdown, safely.
    const answer = log.locator(".msg.assistant:not(.streaming)").last();
    await answer.locator("strong", { hasText: "noon" }).waitFor();
    assert.equal(await answer.locator(".body").innerText(), "It is noon where you are. <b>not markup</b>");
    assert.equal(await answer.locator("b").count(), 0, "model text became markup");

    // Hostile model text through the page's own renderer: only its few tags come out, and no
    // attribute but a link's http(s) href.
    const rendered = await page.evaluate(() => [
      '<img src=x onerror="window.hit=1">', "[x](javascript:window.hit=1)", "`<script>window.hit=1</script>`",
      '"><svg onload=window.hit=1>', "**[a](https://example.com/\"onmouseover=x)**", "```\n<iframe>\n```",
    ].map((s) => { const d = document.createElement("div"); d.innerHTML = md(s); return d; }).map((d) => ({
      tags: [...d.querySelectorAll("*")].map((n) => n.tagName.toLowerCase()),
      attrs: [...d.querySelectorAll("*")].flatMap((n) => [...n.attributes].map((a) => `${a.name}=${a.value}`)),
      text: d.textContent,
    })));
    for (const r of rendered) {
      assert.deepEqual(r.tags.filter((t) => !["p", "strong", "code", "a", "pre", "br"].includes(t)), [], JSON.stringify(r));
      for (const a of r.attrs) assert.match(a, /^(href=https:\/\/|target=_blank$|rel=noopener noreferrer$)/, JSON.stringify(r));
    }
    assert.equal(rendered[0].text, '<img src=x onerror="window.hit=1">');
    assert.equal(rendered[1].tags.includes("a"), false, "a javascript: link was made");
    assert.equal(await page.evaluate(() => window.hit), undefined);

    const types = frames.map((f) => f.type);
    assert.ok(types.filter((t) => t === "token").length >= 3, `few token frames: ${types}`);
    const tools = frames.filter((f) => f.type === "tool").map((f) => `${f.name}:${f.state}`);
    assert.deepEqual(tools, ["get_current_time:start", "get_current_time:ok"]);
    assert.equal(types.at(-1), "response");

    // After a reload the conversation comes back from the session file: the tool step is a
    // chip on the answer again, not an empty bubble.
    await page.reload();
    await page.locator('#conn[data-state="open"]').waitFor();
    const reloaded = page.getByRole("log", { name: "Conversation" });
    await reloaded.locator(".msg.assistant", { hasText: "It is noon" }).getByLabel("tool get_current_time: ok").waitFor();
    assert.deepEqual(await reloaded.locator(".msg.user").allInnerTexts(), ["What time is it?"]);
    assert.equal(await reloaded.locator(".msg").count(), 2, await reloaded.innerText());

    // Capabilities: a core group is locked; a switchable one is switched off, then hidden.
    await page.getByRole("tab", { name: "Capabilities" }).click();
    const before = await getJson(chela.base, "/api/cap/groups");
    const core = before.find((g) => g.is_core);
    const group = before.find((g) => !g.is_core && g.runtime_enabled && g.llm_visible);
    assert.ok(group, `no switchable group that is on: ${JSON.stringify(before)}`);
    if (core) assert.ok(await page.getByRole("switch", { name: `Enable ${core.group_id}` }).isDisabled());

    const enable = page.getByRole("switch", { name: `Enable ${group.group_id}` });
    assert.ok(await enable.isChecked());
    await enable.click();
    await page.waitForFunction((name) => {
      const s = document.querySelector(`input[aria-label="Enable ${name}"]`);
      return s && !s.checked && !s.disabled;
    }, group.group_id);
    const show = page.getByRole("switch", { name: `Show ${group.group_id} to the model` });
    await show.click();
    await page.waitForFunction((name) => {
      const s = document.querySelector(`input[aria-label="Show ${name} to the model"]`);
      return s && !s.checked && !s.disabled;
    }, group.group_id);

    const afterToggle = await getJson(chela.base, "/api/cap/groups");
    const changed = afterToggle.find((g) => g.group_id === group.group_id);
    assert.equal(changed.runtime_enabled, false);
    assert.equal(changed.llm_visible, false);
    // The other groups kept their switches.
    for (const g of afterToggle.filter((g) => g.group_id !== group.group_id)) {
      const was = before.find((b) => b.group_id === g.group_id);
      assert.deepEqual([g.runtime_enabled, g.llm_visible], [was.runtime_enabled, was.llm_visible], g.group_id);
    }
    assert.deepEqual(problems, []);
  });
});

test("first run: the setup form configures the provider and the chat works at once", { timeout: 120_000 }, async () => {
  // The fake demands this key, so a reply proves the key from the form is what Chela now sends.
  const key = "sk-browser-setup";
  const fake = await startFakeLlm([], key);
  const port = await freePort();
  const ws = await workspaceWith(port, []);
  const chela = await startChela(ws, port);
  assert.equal((await getJson(chela.base, "/api/setup")).needs_setup, true);
  await withConsole(chela, {}, async ({ page, problems }) => {
    await page.getByRole("heading", { name: "Set up Chela" }).waitFor();
    await page.getByLabel("Provider").selectOption("anthropic");
    await page.getByLabel("Base URL").fill(fake.url);
    await page.getByLabel("Model").fill("fake-model");
    await page.getByLabel("API key").fill(key);
    await page.getByRole("button", { name: "Save and start chatting" }).click();

    await page.locator('#conn[data-state="open"]').waitFor();
    await page.getByLabel("Message").fill("hello from the setup test");
    await page.getByRole("button", { name: "Send" }).click();
    await page.getByRole("log", { name: "Conversation" })
      .locator(".msg.assistant:not(.streaming)", { hasText: "You said: hello from the setup test" }).waitFor();

    const setup = await getJson(chela.base, "/api/setup");
    assert.equal(setup.needs_setup, false);
    assert.equal(setup.base_url, fake.url);
    const overrides = await readFile(path.join(ws, "overrides.toml"), "utf8");
    assert.ok(overrides.includes(fake.url), overrides);
    // The key is kept, but never shown back.
    const config = await getJson(chela.base, "/api/config");
    const apiKey = config.find((e) => e.key === "llm.api_key");
    assert.ok(apiKey && apiKey.secret && !String(apiKey.value).includes(key), JSON.stringify(apiKey));
    assert.deepEqual(problems, []);
  });
});

test("pairing on the dashboard: an approved Telegram stranger is answered, a denied one gets nothing", { timeout: 120_000 }, async () => {
  const key = "sk-browser-pairing";
  const token = "123456:browser-pairing";
  // Only an approved sender's message reaches the model; had the denied one's, it would have
  // taken the first answer, which goes to the approved sender here.
  const fake = await startFakeLlm([{ text: "Welcome, you are approved." }, { text: "Anything else?" }], key);
  const tg = await startFakeTelegram(token);
  const port = await freePort();
  const ws = await workspaceWith(port, [
    'provider = "anthropic"', `base_url = "${fake.url}"`, 'model = "fake-model"', `api_key = "${key}"`,
  ], ["[channels.telegram]", `token = "${token}"`, `api_base = "${tg.url}"`]);
  const chela = await startChela(ws, port);
  // Two strangers write: each is given a pairing code and nothing more.
  tg.push(501, 501, "hello, may I talk to you?");
  tg.push(502, 502, "let me in");
  const coded = (s, chat) => s.find((m) => m.chat_id === chat && /pairing code/.test(m.text));
  await tg.waitSent((s) => coded(s, 501) && coded(s, 502));
  const codeOf = (chat) => coded(tg.sent, chat).text.match(/chela pairing approve ([A-Z0-9]{8})/)[1];

  await withConsole(chela, { logs: () => [["the fake Telegram", tg.log.text]] }, async ({ page, problems }) => {
    await page.getByRole("tab", { name: "Pairing" }).click();
    const pending = page.getByRole("table", { name: "Pending pairing requests" });
    // Each request shows the code its sender was given, so the owner can match them.
    await pending.getByRole("row").filter({ hasText: codeOf(501) }).filter({ hasText: "501" }).waitFor();
    await pending.getByRole("row").filter({ hasText: codeOf(502) }).filter({ hasText: "502" }).waitFor();

    await page.getByRole("button", { name: "Approve 501 on telegram" }).click();
    await page.getByRole("table", { name: "Allowed senders" })
      .getByRole("button", { name: "Revoke 501 on telegram" }).waitFor();
    await page.getByRole("button", { name: "Deny 502 on telegram" }).click();
    await pending.getByRole("cell", { name: "No one is waiting." }).waitFor();
    const pairing = await getJson(chela.base, "/api/pairing");
    assert.deepEqual(pairing.pending, []);
    assert.deepEqual(pairing.allowed.map((a) => `${a.channel}:${a.sender}`), ["telegram:501"]);

    // Updates are handled in order: the denied sender's message comes first and gets nothing;
    // by the time the approved one's answer is sent, it was long decided.
    const to502 = tg.sent.filter((m) => m.chat_id === 502).length;
    tg.push(502, 502, "please, let me in");
    tg.push(501, 501, "thanks! are you there?");
    await tg.waitSent((s) => s.some((m) => m.chat_id === 501 && m.text === "Welcome, you are approved."));
    assert.equal(tg.sent.filter((m) => m.chat_id === 502).length, to502, JSON.stringify(tg.sent));
    const sessions = (await getJson(chela.base, "/api/sessions")).map((s) => s.id);
    assert.ok(sessions.includes("telegram_501"), JSON.stringify(sessions));
    assert.ok(!sessions.includes("telegram_502"), `a denied sender's words were kept: ${JSON.stringify(sessions)}`);
    assert.deepEqual(problems, []);
  });
});

test("jobs tab: a job added with `chela cron add` shows its next run; a bad cron.json entry is a problem", { timeout: 120_000 }, async () => {
  const port = await freePort();
  // A model is configured (so the page opens on its tabs, not the setup form) but never called.
  const ws = await workspaceWith(port, [
    'provider = "anthropic"', 'base_url = "http://127.0.0.1:9"', 'model = "fake-model"', 'api_key = "sk-browser-jobs"',
  ]);
  // The zone is a top-level setting: it goes before the tables.
  const config = path.join(ws, "chela.toml");
  await writeFile(config, 'timezone = "Europe/Berlin"\n' + await readFile(config, "utf8"));
  // Hand-written: one good job, and one whose cron expression names hour 25 (line 3). The good
  // one fires at an hour twelve hours away in Berlin, so it neither fires nor is caught up
  // (the grace is an hour) while the test runs: its planted last outcome stays what the page shows.
  const berlinHour = Number(new Intl.DateTimeFormat("en-GB", { timeZone: "Europe/Berlin", hour: "2-digit", hourCycle: "h23" })
    .format(new Date()));
  const teaHour = String((berlinHour + 12) % 24).padStart(2, "0");
  const teaExpr = `0 ${Number(teaHour)} * * 1-5`;
  const handWritten = '{"version": 1, "jobs": [\n' +
    `  {"id": "tea", "trigger": {"type": "cron", "expr": "${teaExpr}"}, "action": {"type": "cap", "name": "get_current_time"}},\n` +
    '  {"id": "broken", "trigger": {"type": "cron", "expr": "0 25 * * *"}, "action": {"type": "cap", "name": "get_current_time"}}\n' +
    "]}\n";
  await writeFile(path.join(ws, "cron.json"), handWritten);
  // What the last run of "tea" came to, as the daemon keeps it across restarts: it failed at
  // 2027-01-15 08:01 UTC.
  await mkdir(path.join(ws, "state"), { recursive: true });
  await writeFile(path.join(ws, "state", "jobs.json"), JSON.stringify({ jobs: { tea:
    { at: 1800000060, ok: false, message: "telegram/42 is not a chat allowed to talk to Chela" } } }));
  const chela = await startChela(ws, port);
  await withConsole(chela, {}, async ({ page, problems }) => {
    await page.getByRole("tab", { name: "Jobs" }).click();
    const jobs = page.getByRole("table", { name: "Scheduled jobs" });
    const tea = jobs.getByRole("row").filter({ hasText: "tea" });
    await tea.waitFor();
    // The page shows what the API computed, in the configured zone: that hour, Berlin time.
    const api = await getJson(chela.base, "/api/scheduler/jobs");
    assert.equal(api.zone, "Europe/Berlin");
    const teaJob = api.jobs.find((j) => j.id === "tea");
    assert.match(teaJob.next_fire_local, new RegExp(`^\\d{4}-\\d\\d-\\d\\d ${teaHour}:00:00 \\+0[12]:00$`));
    assert.deepEqual(teaJob.trigger, { type: "cron", expr: teaExpr });
    // The last outcome in the user's clock (09:01 in Berlin), marked as a failure.
    const outcome = "not run at 2027-01-15 09:01:00 +01:00: telegram/42 is not a chat allowed to talk to Chela";
    assert.equal(teaJob.status, outcome);
    // The trigger in words, in the job's zone (the user's, as none is named).
    assert.equal(teaJob.when, `every weekday at ${teaHour}:00 Europe/Berlin`);
    assert.deepEqual((await tea.getByRole("cell").allInnerTexts()).slice(0, 5),
      ["tea", "active", teaJob.next_fire_local, teaJob.when, outcome]);
    assert.equal(await tea.getByRole("cell").nth(4).getAttribute("class"), "danger");
    assert.equal(await jobs.getByRole("row").filter({ hasText: "broken" }).count(), 0, "a bad job is listed as a job");
    const problem = page.locator("#jobs-problems li");
    await problem.first().waitFor();
    assert.equal(await problem.count(), 1);
    const text = await problem.innerText();
    assert.ok(text.includes("cron.json line 3") && text.includes('"broken"') && text.includes("trigger.expr"), text);
    assert.match(await page.locator("#jobs-zone").innerText(), /Europe\/Berlin/);

    // A job added from the command line while the daemon runs: 2100-01-01 00:00 UTC.
    const added = await runChela(ws, ["cron", "add",
      '{"id": "new-century", "trigger": {"type": "once", "at": 4102444800}, "action": {"type": "cap", "name": "get_current_time"}}']);
    assert.match(added, /Added job new-century; next run: 2100-01-01 01:00:00 \+01:00/);
    // The tab reads the jobs again each time it is shown.
    await page.getByRole("tab", { name: "Jobs" }).click();
    const century = jobs.getByRole("row").filter({ hasText: "new-century" });
    await century.waitFor();
    assert.equal(await century.getByRole("cell").nth(2).innerText(), "2100-01-01 01:00:00 +01:00");
    // The command wrote a whole valid file: the bad entry is gone from it, and the hand-written
    // file is kept as cron.json.bak, so the page no longer lists a problem.
    await page.waitForFunction(() => document.querySelectorAll("#jobs-problems li").length === 0);
    assert.equal(await readFile(path.join(ws, "cron.json.bak"), "utf8"), handWritten);
    assert.deepEqual(problems, []);
  });
});

test("devices tab: a waiting device is approved and activates, one is denied, a hostile board name stays text", { timeout: 120_000 }, async () => {
  const port = await freePort();
  // A model is configured (so the page opens on its tabs) but never called.
  const ws = await workspaceWith(port, [
    'provider = "anthropic"', 'base_url = "http://127.0.0.1:9"', 'model = "fake-model"', 'api_key = "sk-browser-devices"',
  ]);
  const config = path.join(ws, "chela.toml");
  await writeFile(config, 'timezone = "Europe/Berlin"\n' + await readFile(config, "utf8"));
  const chela = await startChela(ws, port);
  const good = "aa:bb:cc:dd:ee:01", evil = "aa:bb:cc:dd:ee:02";
  const hostile = { board: '<img src=x onerror="window.hit=1">', name: "<script>window.hit=2</script>", version: '"><svg onload=window.hit=3>' };
  const first = await device(chela.base, good, "");
  assert.equal(first.status, 200, JSON.stringify(first.json));
  const code = first.json.activation.code;
  assert.equal(first.json.websocket, undefined, "an unknown device got a URL");
  const second = await device(chela.base, evil, "", hostile);
  assert.equal(second.status, 200, JSON.stringify(second.json));
  const evilCode = second.json.activation.code;
  assert.equal((await device(chela.base, good, "activate", { body: {} })).status, 202, "waits before approval");

  await withConsole(chela, {}, async ({ page, problems }) => {
    await page.getByRole("tab", { name: "Devices" }).click();
    const waiting = page.getByRole("table", { name: "Devices waiting for approval" });
    const goodRow = waiting.getByRole("row").filter({ hasText: good });
    await goodRow.waitFor();
    // The row shows what the API computed, in the user's zone, and the code the device shows.
    const api = await getJson(chela.base, "/api/devices");
    assert.equal(api.zone, "Europe/Berlin");
    const p = api.pending.find((x) => x.id === good);
    assert.match(p.last_seen_local, /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d \+0[12]:00$/);
    const goodCells = await goodRow.getByRole("cell").allInnerTexts();
    assert.deepEqual(goodCells.slice(0, 6), [good, "bread-compact-wifi (b)", "1.9.0", code, p.last_seen_local, p.expires_local]);
    assert.match(await page.locator("#devices-zone").innerText(), /Europe\/Berlin/);

    // What the hostile device reported is shown as the text it is: no element was made of it.
    const evilRow = waiting.getByRole("row").filter({ hasText: evil });
    await evilRow.waitFor();
    const cells = await evilRow.getByRole("cell").allInnerTexts();
    assert.equal(cells[1], `${hostile.board} (${hostile.name})`);
    assert.equal(cells[2], hostile.version);
    assert.equal(cells[3], evilCode);
    assert.equal(await page.locator("#devices img, #devices script, #devices svg").count(), 0);
    assert.equal(await page.evaluate(() => window.hit), undefined);

    // Approve binds the device: its activation poll now answers 200 and it is listed as bound.
    await page.getByRole("button", { name: `Approve device ${good} (code ${code})` }).click();
    const bound = page.getByRole("table", { name: "Bound devices" });
    await bound.getByRole("button", { name: `Revoke device ${good}` }).waitFor();
    assert.equal((await device(chela.base, good, "activate", { body: {} })).status, 200);
    const again = await device(chela.base, good, "");
    assert.equal(again.json.websocket.url, `ws://127.0.0.1:${port}/xiaozhi/v1/`);
    assert.equal(again.json.websocket.token.length, 64);

    // Deny forgets the hostile device's code: its poll is refused, and nothing is waiting.
    await page.getByRole("button", { name: `Deny device ${evil} (code ${evilCode})` }).click();
    await waiting.getByRole("cell", { name: "No device is waiting." }).waitFor();
    assert.equal((await device(chela.base, evil, "activate", { body: {} })).status, 403);

    // The bound row, read again: approved with its token fetched, seen in the user's zone.
    await page.getByRole("button", { name: "Refresh" }).click();
    const goodBound = bound.getByRole("row").filter({ hasText: good });
    await goodBound.getByRole("cell", { name: "approved", exact: true }).waitFor();
    const d = (await getJson(chela.base, "/api/devices")).devices.find((x) => x.id === good);
    assert.equal(await goodBound.getByRole("cell").nth(4).innerText(), d.last_seen_local);
    assert.match(await page.locator("#devices-firmware").innerText(), /No firmware is offered/);

    // Revoke: the token stops working and the device must ask again.
    await page.getByRole("button", { name: `Revoke device ${good}` }).click();
    await goodBound.getByRole("cell", { name: "revoked", exact: true }).waitFor();
    assert.equal(await bound.getByRole("button", { name: `Revoke device ${good}` }).count(), 0);
    assert.equal((await device(chela.base, good, "activate", { body: {} })).status, 403);
    const after = await device(chela.base, good, "");
    assert.ok(after.json.activation && !after.json.websocket, JSON.stringify(after.json));

    // A firmware offer made from the terminal shows on the tab.
    const image = path.join(ws, "new.bin");
    await writeFile(image, Buffer.concat([Buffer.from([0xe9]), Buffer.alloc(2047, 7)]));
    await runChela(ws, ["device", "firmware", "set", image, "2.0.6"]);
    await page.getByRole("button", { name: "Refresh" }).click();
    await page.locator("#devices-firmware", { hasText: "Version 2.0.6 (2.0 KiB) is offered to every device" }).waitFor();
    assert.deepEqual(problems, []);
  });
});

test("status tab: the channels' states, devices online, pairing requests waiting and the next jobs, as `chela status` says", { timeout: 120_000 }, async () => {
  const token = "123456:browser-status";
  const tg = await startFakeTelegram(token);
  const port = await freePort();
  // A model is configured (so the page opens on its tabs) but never called: strangers only get a code.
  const ws = await workspaceWith(port, [
    'provider = "anthropic"', 'base_url = "http://127.0.0.1:9"', 'model = "fake-model"', 'api_key = "sk-browser-status"',
  ], ["[channels.telegram]", `token = "${token}"`, `api_base = "${tg.url}"`]);
  // A job due next New Year's midnight: it does not fire while the test runs. Its name is hostile.
  const hostile = '<img src=x onerror="window.hit=1">';
  await writeFile(path.join(ws, "cron.json"), JSON.stringify({ version: 1, jobs: [{
    id: "newyear", name: hostile, trigger: { type: "cron", expr: "0 0 1 1 *" }, action: { type: "cap", name: "get_current_time" },
  }] }));
  const chela = await startChela(ws, port);
  tg.push(601, 601, "hello?");
  const coded = (s) => s.find((m) => m.chat_id === 601 && /pairing code/.test(m.text));
  await tg.waitSent((s) => coded(s));
  const code = coded(tg.sent).text.match(/chela pairing approve ([A-Z0-9]{8})/)[1];

  await withConsole(chela, { logs: () => [["the fake Telegram", tg.log.text]] }, async ({ page, problems }) => {
    const tabs = await page.getByRole("tab").allInnerTexts();
    assert.equal(tabs[0], "Status", JSON.stringify(tabs));
    await page.getByRole("tab", { name: "Status" }).click();
    const channels = page.getByRole("table", { name: "Channel states" });
    await channels.getByRole("row").filter({ hasText: "telegram" }).filter({ hasText: "connected since" }).waitFor();
    await page.locator("#status-devices", { hasText: "0 device(s) connected now" }).waitFor();
    await page.getByRole("table", { name: "Pairing requests waiting" }).getByRole("row")
      .filter({ hasText: "telegram:601" }).filter({ hasText: code }).waitFor();
    const job = page.getByRole("table", { name: "Next jobs" }).getByRole("row").filter({ hasText: "newyear" });
    await job.waitFor();
    assert.ok((await job.innerText()).includes(hostile), "a job's name stays text");
    assert.equal(await page.evaluate(() => window.hit), undefined);

    // The same as `chela status --json` reads from the daemon.
    const status = JSON.parse(await runChela(ws, ["status", "--json"]));
    assert.deepEqual(status.pairing_requests.map((p) => p.code), [code]);
    assert.deepEqual(status.next_jobs.map((j) => j.id), ["newyear"]);
    assert.equal(status.channels.find((c) => c.name === "telegram").connected, true);
    assert.deepEqual(problems, []);
  });
});
