// The start every console test shares: a fresh browser and a page logged in with `chela run`'s
// one-time link, handed to the test only once its session exists, so no test opens a tab while
// the link's code is still being traded for the token.

import { launchBrowser, watchPage } from "./harness.mjs";

/** Resolves once the page's session exists: the chat's socket is open, or the setup form is up on a first run. */
export async function waitForSession(page) {
  await page.locator('#conn[data-state="open"], #setup:not([hidden])').first().waitFor();
}

/**
 * Opens a fresh browser on `chela`'s login link (from `startChela`) and runs `body({ page, problems })`
 * once the page is past `waitForSession`. `before(page)` runs on the new page before the link is
 * opened (handlers for dialogs, sockets, requests). A failure's message gets what `chela run`
 * said, and each `[name, text]` of `logs()`; the browser is closed whatever happens.
 */
export async function withConsole(chela, { before, logs } = {}, body) {
  const browser = await launchBrowser();
  try {
    const page = await browser.newPage();
    const problems = watchPage(page);
    if (before) await before(page);
    await page.goto(chela.login);
    await waitForSession(page);
    await body({ page, problems });
  } catch (e) {
    e.message += `\n--- chela run said:\n${chela.log.text}`;
    for (const [name, text] of logs ? logs() : []) e.message += `\n--- ${name} said:\n${text}`;
    throw e;
  } finally {
    await browser.close();
  }
}
