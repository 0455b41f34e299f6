// End to end in a real VS Code (code-server, started by scripts/e2e with the packaged extension
// installed), driven through headless Chromium: language, diagnostics, the ▶ Run and ▶ Run with
// args… lenses, the approval notification, the Workflow Runs view with its inline actions, and the
// status bar.

import assert from "node:assert/strict";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { pathToFileURL } from "node:url";

const { CODE_SERVER_URL, E2E_WORKSPACE, E2E_TOOLS, E2E_SCREENSHOTS } = process.env;
const skip = CODE_SERVER_URL && E2E_WORKSPACE && E2E_TOOLS ? false : "run through scripts/e2e";

const CHROMIUM_FLAGS = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--no-first-run",
];

async function openFile(page, name) {
  await page.keyboard.press("Control+P");
  await page.locator(".quick-input-widget input").fill(name);
  await page.locator(".quick-input-list .monaco-list-row", { hasText: name }).first().waitFor();
  await page.keyboard.press("Enter");
  await page.locator(".tab.active", { hasText: name }).waitFor();
}

test("in VS Code a workflow script is checked, runs from its lens, asks for approval and shows its run", { skip, timeout: 240_000 }, async () => {
  const playwright = await import(pathToFileURL(join(E2E_TOOLS, "node_modules", "playwright-core", "index.mjs")).href);
  const browser = await playwright.chromium.launch({ executablePath: "/usr/bin/chromium", args: CHROMIUM_FLAGS });
  const shots = E2E_SCREENSHOTS ?? join(E2E_WORKSPACE, "..", "screenshots");
  mkdirSync(shots, { recursive: true });
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.setDefaultTimeout(45_000);
  const shot = (name) => page.screenshot({ path: join(shots, `${name}.png`) });
  try {
    await page.goto(`${CODE_SERVER_URL}/?folder=${encodeURIComponent(E2E_WORKSPACE)}`);
    await page.locator(".monaco-workbench").waitFor({ timeout: 90_000 });

    // A broken script: piflow's diagnostics underline it.
    await openFile(page, "broken.workflow.js");
    await page.locator(".monaco-editor .squiggly-error").first().waitFor();

    // A good script: its own language, no complaint about top-level await/return, Run lenses.
    await openFile(page, "ship.workflow.js");
    assert.equal((await page.locator("#status\\.editor\\.mode").textContent())?.trim(), "Workflow Script (piflow)");
    const run = page.locator(".codelens-decoration a").filter({ hasText: /^▶ Run$/ });
    await run.waitFor();
    assert.equal(await page.locator(".monaco-editor.focused .squiggly-error").count(), 0);
    await shot("1-script");

    await page.locator('.activitybar [aria-label="piflow"]').first().click();
    await run.click();

    const toast = page.locator(".notification-toast", { hasText: "Workflow ship checkpoint ship: Ship?" });
    await toast.waitFor();
    const sidebar = page.locator(".part.sidebar");
    const runRow = sidebar.locator(".monaco-list-row", { hasText: /ship\s*[0-9a-f]{8}/ });
    await runRow.filter({ hasText: "awaiting input" }).waitFor();
    await sidebar.locator(".monaco-list-row", { hasText: "checkpoint ship" }).waitFor();
    await page.locator(".statusbar-item", { hasText: /^piflow/ }).first().waitFor();
    await shot("2-checkpoint");

    await toast.getByRole("button", { name: "Approve" }).click();
    await runRow.filter({ hasText: "completed" }).waitFor();
    await sidebar.locator(".monaco-list-row", { hasText: /writer\s*completed/ }).waitFor();
    await shot("3-completed");

    // ▶ Run with args… asks for JSON here (not the server's message-box fallback); the tree answers.
    await page.locator(".codelens-decoration a").filter({ hasText: /^▶ Run with args…$/ }).click();
    const input = page.locator(".quick-input-widget input");
    await input.fill("{not json");
    await page.locator(".quick-input-widget", { hasText: "Not valid JSON" }).waitFor();
    await input.fill('{"n": 1}');
    await page.keyboard.press("Enter");
    const checkpointRow = sidebar.locator(".monaco-list-row", { hasText: "checkpoint ship" });
    await checkpointRow.hover();
    await checkpointRow.getByRole("button", { name: "Reject" }).click();
    await checkpointRow.waitFor({ state: "detached" });
    await runRow.filter({ hasText: "completed" }).nth(1).waitFor();
    await shot("4-rejected-from-tree");
  } catch (error) {
    await shot("failure").catch(() => undefined);
    const rows = await page.locator(".monaco-list-row").allInnerTexts().catch(() => []);
    console.error("list rows:", JSON.stringify(rows));
    throw error;
  } finally {
    await browser.close();
  }
});
