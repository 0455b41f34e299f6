// End to end in a real VS Code (code-server, started by scripts/e2e with the packaged extension
// installed), driven through headless Chromium: a workflow script stays JavaScript with both the
// TypeScript service (typed globals, hover, rename, no error for top-level await/return) and piflow
// (diagnostics, the Problems panel from `fix N errors first`) attached; the ▶ Run and ▶ Run with
// args… lenses, the approval notification, the Workflow Runs view with its inline actions, the run
// view with an agent's output, and the status bar.

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

/** Moves the cursor of the active editor to a 1-based line and column. */
async function goTo(page, line, column) {
  await page.keyboard.press("Control+G");
  await page.locator(".quick-input-widget input").fill(`:${line}:${column}`);
  await page.keyboard.press("Enter");
  await page.locator(".quick-input-widget").waitFor({ state: "hidden" });
}

/** The visible text of the active editor, with the rendering's non-breaking spaces as spaces. */
async function editorText(page) {
  const text = await page.locator(".editor-group-container.active .monaco-editor .view-lines").first().innerText();
  return text.replace(/\u00a0/g, " ");
}

async function openFile(page, name) {
  await page.keyboard.press("Control+P");
  await page.locator(".quick-input-widget input").fill(name);
  // A click, not Enter: a recently opened run view ("ship 1a2b3c4d.md") may be the first row.
  await page.locator(".quick-input-list .monaco-list-row", { hasText: name }).first().click();
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

    // A broken script: piflow's diagnostics underline it; its lens shows the problems.
    await openFile(page, "broken.workflow.js");
    await page.locator(".monaco-editor .squiggly-error").first().waitFor();
    await page.locator(".codelens-decoration a").filter({ hasText: /^▶ Run \(fix 1 error first\)$/ }).click();
    const problems = page.locator(".markers-panel");
    await problems.waitFor();
    await problems.locator(".monaco-list-row", { hasText: "INVALID_METADATA" }).waitFor();
    // …and the cursor selects the first error: `"ship"`, line 1, columns 33-39.
    await page.locator(".statusbar-item", { hasText: "Ln 1, Col 39 (6 selected)" }).waitFor();
    await shot("0-problems");

    // A good script is JavaScript for VS Code, with piflow's lenses beside the TypeScript service.
    await openFile(page, "ship.workflow.js");
    assert.equal((await page.locator("#status\\.editor\\.mode").textContent())?.trim(), "JavaScript");
    const run = page.locator(".codelens-decoration a").filter({ hasText: /^▶ Run$/ });
    await run.waitFor();
    // TypeScript knows the workflow globals from the bundled declarations: checkpoint() is typed.
    await page.locator(".editor-group-container.active .view-line span > span", { hasText: /^answer$/ }).first().hover();
    await page.locator(".monaco-hover-content", { hasText: 'const answer: "approved" | "rejected"' }).first().waitFor();
    await shot("1-typescript-hover");
    await page.mouse.move(0, 0);
    // TypeScript has checked the file by now: top-level await and return are no errors to it.
    assert.equal(await page.locator(".editor-group-container.active .squiggly-error").count(), 0);

    // Rename (F2) is TypeScript's: every occurrence of the variable changes.
    await goTo(page, 2, 7);
    await page.keyboard.press("F2");
    const renameInput = page.locator(".rename-box input, .rename-input").first();
    await renameInput.waitFor();
    await renameInput.fill("summary");
    await page.keyboard.press("Enter");
    await page.locator(".editor-group-container.active .view-lines", { hasText: "const summary" }).waitFor();
    // Both uses renamed; the shorthand property keeps its key, the phase name (a string) is untouched.
    assert.equal(
      await editorText(page),
      [
        'phase("draft");',
        'const summary = await agent("Write one line about durable workflows.", { label: "writer" });',
        'const answer = await checkpoint({ name: "ship", prompt: "Ship?", context: null });',
        "return { draft: summary, answer };",
      ].join("\n"),
    );
    await page.keyboard.press("Control+S");
    await page.locator(".tab.active.dirty").waitFor({ state: "detached" });
    await shot("1-renamed");

    // A run launched from a terminal before the window opened (scripts/e2e) shows whole: its
    // checkpoint and agent rows come from its snapshot; it is answered like any other.
    await page.locator('.activitybar [aria-label^="piflow"]').first().click();
    const sidebar = page.locator(".part.sidebar");
    const waitingRow = sidebar.locator(".monaco-list-row", { hasText: /waiting\s*[0-9a-f]{8}/ });
    await waitingRow.filter({ hasText: "awaiting input" }).waitFor();
    await sidebar.locator(".monaco-list-row", { hasText: "checkpoint deploy" }).waitFor();
    await sidebar.locator(".monaco-list-row", { hasText: /planner\s*completed/ }).waitFor();
    await shot("2-run-from-before");
    const earlier = page.locator(".notification-toast", { hasText: "Workflow waiting checkpoint deploy: Deploy?" });
    await earlier.getByRole("button", { name: "Approve" }).click();
    await waitingRow.filter({ hasText: "completed" }).waitFor();

    await run.click();

    const toast = page.locator(".notification-toast", { hasText: "Workflow ship checkpoint ship: Ship?" });
    await toast.waitFor();
    const runRow = sidebar.locator(".monaco-list-row", { hasText: /ship\s*[0-9a-f]{8}/ });
    await runRow.filter({ hasText: "awaiting input" }).waitFor();
    await sidebar.locator(".monaco-list-row", { hasText: "checkpoint ship" }).waitFor();
    await page.locator(".statusbar-item", { hasText: /^piflow/ }).first().waitFor();
    await shot("2-checkpoint");

    await toast.getByRole("button", { name: "Approve" }).click();
    await runRow.filter({ hasText: "completed" }).waitFor();
    await sidebar.locator(".monaco-list-row", { hasText: /writer\s*completed/ }).waitFor();
    await shot("3-completed");

    // The run view: a read-only document (not an Untitled file) with what the agent answered.
    const completedRow = runRow.filter({ hasText: "completed" }).first();
    await completedRow.hover();
    await completedRow.getByRole("button", { name: "Show Run Details" }).click();
    const viewTab = page.locator(".tab.active", { hasText: /ship [0-9a-f]{8}\.md/ });
    await viewTab.waitFor();
    await page.locator(".editor-group-container.active .view-lines", { hasText: "[scripted] Write one line" }).waitFor();
    const viewText = await editorText(page);
    assert.match(viewText, /# ship — completed/);
    assert.match(viewText, /### writer/);
    assert.match(viewText, /\[scripted\] Write one line about durable workflows\./);
    assert.equal(await page.locator(".tab", { hasText: /^Untitled/ }).count(), 0);
    await shot("3-run-view");
    await openFile(page, "ship.workflow.js");

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
