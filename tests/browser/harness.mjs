// The parts the browser test drives: the scripted fake LLM, `chela run` on a temp workspace,
// and Debian's Chromium. Every wait here has a deadline, and every process started is stopped
// by `stopAll()`, so a failing test still ends by itself and leaves nothing running.

import { execFile, spawn } from "node:child_process";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

import { chromium } from "playwright-core";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../..");
export const CHELA = process.env.CHELA_BIN || path.join(repo, "target/debug/chela");
export const FAKE_LLM = process.env.FAKE_LLM_BIN || path.join(repo, "target/debug/chela-fake-llm");
export const FAKE_TELEGRAM = process.env.FAKE_TELEGRAM_BIN || path.join(repo, "target/debug/chela-fake-telegram");
export const CHROMIUM = process.env.CHROMIUM || "/usr/bin/chromium";

// What a process said, kept for the failure message; bounded so a chatty daemon cannot fill memory.
const MAX_LOG_CHARS = 64 * 1024;
const started = [];
const temps = [];

function capture(proc, name) {
  const log = { text: "" };
  const add = (chunk) => {
    log.text += chunk.toString();
    if (log.text.length > MAX_LOG_CHARS) log.text = log.text.slice(-MAX_LOG_CHARS);
  };
  proc.stdout?.on("data", add);
  proc.stderr?.on("data", add);
  proc.on("error", (e) => add(`\n[${name} could not start: ${e.message}]\n`));
  return log;
}

export async function tempDir(prefix) {
  const dir = await mkdtemp(path.join(os.tmpdir(), prefix));
  temps.push(dir);
  return dir;
}

/** An environment without the caller's keys and Chela settings, so only the test's config counts. */
function cleanEnv(extra) {
  const env = {};
  for (const [k, v] of Object.entries(process.env)) {
    if (k.startsWith("CHELA_") || k.endsWith("_API_KEY") || /^(https?|all|no)_proxy$/i.test(k)) continue;
    env[k] = v;
  }
  return { ...env, ...extra };
}

/** A free loopback port: bound, read, released. */
export function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once("error", reject);
    srv.listen(0, "127.0.0.1", () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

/** Starts `chela-fake-llm` with `script` (a list of steps; empty: the demo model). */
export async function startFakeLlm(script, key) {
  const dir = await tempDir("chela-fake-");
  const file = path.join(dir, "script.json");
  await writeFile(file, JSON.stringify(script));
  const args = ["--script", file, "--exit-on-stdin-eof"];
  if (key) args.push("--key", key);
  // stdin stays an open pipe: when this process dies, the fake sees end of file and exits.
  const proc = spawn(FAKE_LLM, args, { stdio: ["pipe", "pipe", "pipe"], env: cleanEnv({}) });
  started.push(proc);
  const log = capture(proc, "chela-fake-llm");
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`chela-fake-llm printed no address in 10 s:\n${log.text}`)), 10_000);
    const look = () => {
      const m = log.text.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    };
    proc.stdout.on("data", look);
    proc.on("exit", (code) => { clearTimeout(timer); reject(new Error(`chela-fake-llm exited (${code}):\n${log.text}`)); });
  });
  return { url, proc, log };
}

/**
 * Starts `chela-fake-telegram` for the bot `token`. Returns its `url`, `push(chat, from, text)`
 * (a user's message, queued for getUpdates), `sent` (every message the bot sent so far:
 * `{chat_id, message_id, text}`) and `waitSent(pred, ms)`, which resolves with `sent` once
 * `pred(sent)` holds.
 */
export async function startFakeTelegram(token) {
  // stdin stays an open pipe: it is how messages are pushed, and its end stops the fake.
  const proc = spawn(FAKE_TELEGRAM, ["--token", token], { stdio: ["pipe", "pipe", "pipe"], env: cleanEnv({}) });
  started.push(proc);
  const log = capture(proc, "chela-fake-telegram");
  const sent = [];
  const waiters = new Set();
  let buffered = "";
  proc.stdout.on("data", (chunk) => {
    buffered += chunk.toString();
    let nl;
    while ((nl = buffered.indexOf("\n")) >= 0) {
      const line = buffered.slice(0, nl);
      buffered = buffered.slice(nl + 1);
      if (line.startsWith("sent ")) sent.push(JSON.parse(line.slice(5)));
    }
    for (const w of waiters) w();
  });
  const url = await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`chela-fake-telegram printed no address in 10 s:\n${log.text}`)), 10_000);
    const look = () => {
      const m = log.text.match(/listening on (http:\/\/127\.0\.0\.1:\d+)/);
      if (m) { clearTimeout(timer); resolve(m[1]); }
    };
    proc.stdout.on("data", look);
    proc.on("exit", (code) => { clearTimeout(timer); reject(new Error(`chela-fake-telegram exited (${code}):\n${log.text}`)); });
  });
  const push = (chat, from, text) => proc.stdin.write(JSON.stringify({ chat, from, text }) + "\n");
  const waitSent = (pred, ms = 15_000) => new Promise((resolve, reject) => {
    const check = () => {
      if (!pred(sent)) return;
      waiters.delete(check);
      clearTimeout(timer);
      resolve(sent);
    };
    const timer = setTimeout(() => {
      waiters.delete(check);
      reject(new Error(`the fake Telegram did not see the expected messages in ${ms} ms: ${JSON.stringify(sent)}`));
    }, ms);
    waiters.add(check);
    check();
  });
  return { url, proc, log, sent, push, waitSent };
}

// gateway.token of each running gateway, by base URL: the test's own requests carry it, as the
// owner's scripts do (the page gets it from the login link instead).
const tokens = new Map();

/**
 * Runs `chela run` on `workspace` and waits until the gateway on `port` answers /health.
 * `login` is the one-time console link it printed: open it, not `base`, to be logged in.
 */
export async function startChela(workspace, port) {
  const home = await tempDir("chela-home-");
  const proc = spawn(CHELA, ["--workspace", workspace, "run"], {
    stdio: ["ignore", "pipe", "pipe"],
    env: cleanEnv({ HOME: home, RUST_BACKTRACE: "1" }),
  });
  started.push(proc);
  const log = capture(proc, "chela run");
  let exited = null;
  proc.on("exit", (code, signal) => { exited = signal || code; });
  const base = `http://127.0.0.1:${port}`;
  const deadline = Date.now() + 20_000;
  for (;;) {
    if (exited !== null) throw new Error(`chela run exited (${exited}) before serving:\n${log.text}`);
    try {
      const res = await fetch(`${base}/health`, { signal: AbortSignal.timeout(1000) });
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) throw new Error(`chela run did not answer ${base}/health within 20 s:\n${log.text}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  // The link is printed just after the gateway starts listening.
  let login = null;
  while (!(login = /http:\/\/\S+#login=[0-9a-f.]+/.exec(log.text))) {
    if (Date.now() > deadline) throw new Error(`chela run printed no login link within 20 s:\n${log.text}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  const overrides = await readFile(path.join(workspace, "overrides.toml"), "utf8");
  const token = /token = "([0-9a-f]{64})"/.exec(overrides);
  if (!token) throw new Error(`chela run stored no gateway.token:\n${overrides}`);
  tokens.set(base, token[1]);
  return { base, proc, log, login: login[0] };
}

/**
 * The config a test workspace starts from; `llm` is the [llm] table's lines (may be empty),
 * `more` any further lines (other tables).
 */
export async function workspaceWith(port, llm, more = []) {
  const dir = await tempDir("chela-ws-");
  const lines = [];
  if (llm.length) lines.push("[llm]", ...llm, "");
  lines.push("[gateway]", `listen = "127.0.0.1:${port}"`, "", ...more, "");
  await writeFile(path.join(dir, "chela.toml"), lines.join("\n"));
  return dir;
}

/** Headless Debian Chromium with a fresh profile, the flags CI needs, and short timeouts. */
export async function launchBrowser() {
  const profile = await tempDir("chela-chromium-");
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    timeout: 30_000,
    args: [
      "--headless",
      "--no-sandbox",
      "--disable-gpu",
      "--disable-quic",
      "--no-first-run",
      "--disable-background-networking",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  context.setDefaultTimeout(15_000);
  context.setDefaultNavigationTimeout(15_000);
  return context;
}

/** A JSON request from the test itself (not the page), for checking what the page changed. */
export async function getJson(base, p) {
  const headers = tokens.has(base) ? { Authorization: `Bearer ${tokens.get(base)}` } : {};
  const res = await fetch(base + p, { headers, signal: AbortSignal.timeout(5000) });
  if (!res.ok) throw new Error(`GET ${p}: ${res.status} ${await res.text()}`);
  return res.json();
}

/** Stops every process this file started (SIGTERM, then SIGKILL after 5 s) and removes temp dirs. */
export async function stopAll() {
  await Promise.all(started.splice(0).map((proc) => new Promise((resolve) => {
    if (proc.exitCode !== null || proc.signalCode !== null) return resolve();
    const kill = setTimeout(() => proc.kill("SIGKILL"), 5000);
    proc.once("exit", () => { clearTimeout(kill); resolve(); });
    proc.kill("SIGTERM");
  })));
  await Promise.all(temps.splice(0).map((d) => rm(d, { recursive: true, force: true })));
}

/** Runs a `chela` command (not the daemon) on `workspace` to its end; its stdout, or throws with both streams. */
export async function runChela(workspace, args) {
  const home = await tempDir("chela-home-");
  return new Promise((resolve, reject) => {
    execFile(CHELA, ["--workspace", workspace, ...args], { env: cleanEnv({ HOME: home }), timeout: 20_000 },
      (err, stdout, stderr) => (err ? reject(new Error(`chela ${args.join(" ")}: ${err.message}\n${stdout}${stderr}`)) : resolve(stdout)));
  });
}

// Goes with the page's console and uncaught errors, so a broken script fails the test loudly.
export function watchPage(page) {
  const problems = [];
  page.on("pageerror", (e) => problems.push(`uncaught: ${e.message}`));
  page.on("console", (m) => {
    // A fresh chat has no session file yet: the page's history look-up gets a 404, which it expects.
    if (m.type() === "error" && !/status of 404/.test(m.text())) problems.push(`console: ${m.text()}`);
  });
  return problems;
}

// A device's OTA check or activation poll, with the headers the xiaozhi firmware sends
// (ota.cc); `board` lands in the body's board.type, which the dashboard shows.
export async function device(base, mac, route, { board = "bread-compact-wifi", name = "b", version = "1.9.0", body } = {}) {
  const client = "3f1c2a4e-7777-4000-8000-" + mac.replace(/:/g, "");
  const info = { version: 2, language: "en-US", mac_address: mac, uuid: client, chip_model_name: "esp32s3",
    application: { name: "xiaozhi", version }, board: { type: board, name } };
  const res = await fetch(base + "/xiaozhi/ota/" + route, {
    method: "POST",
    headers: { "Device-Id": mac, "Client-Id": client, "Activation-Version": "1", "User-Agent": "bread-compact-wifi/" + version,
      "Content-Type": "application/json" },
    body: JSON.stringify(body === undefined ? info : body),
    signal: AbortSignal.timeout(5000),
  });
  const text = await res.text();
  return { status: res.status, json: text ? JSON.parse(text) : null };
}
