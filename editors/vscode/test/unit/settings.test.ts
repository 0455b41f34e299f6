import assert from "node:assert/strict";
import { test } from "node:test";
import { compactCount, dollars, formatBudgetGauge, formatLimits, oneLineJson } from "../../src/format";
import { parseBudgetPatch, parseJson, runOptionsFromSettings } from "../../src/serverCommands";
import { DEFAULT_FILES, readSettings } from "../../src/settings";
import { isRefused } from "../../src/trust";

test("settings fall back to their defaults and ignore values of the wrong type", () => {
  const settings = readSettings({ get: () => undefined });
  assert.deepEqual(settings, {
    server: { command: [], pythonPath: "" },
    run: { backend: "", fixtures: "", concurrency: null, budget: null },
    files: DEFAULT_FILES,
    notifyApprovals: true,
  });
  const odd: Record<string, unknown> = {
    "server.command": "piflow serve",
    "run.concurrency": 0,
    "run.budget": [1],
    "approvals.notify": false,
  };
  const read = readSettings({ get: (key) => odd[key] });
  assert.deepEqual(read.server.command, []);
  assert.equal(read.run.concurrency, null);
  assert.equal(read.run.budget, null);
  assert.equal(read.notifyApprovals, false);
});

test("only the run settings that are set become run options", () => {
  assert.deepEqual(runOptionsFromSettings({ backend: "", fixtures: "", concurrency: null, budget: {} }), {});
  assert.deepEqual(
    runOptionsFromSettings({ backend: "scripted", fixtures: "/f.yaml", concurrency: 2, budget: { costUsd: { hard: 1 } } }),
    { backend: "scripted", fixtures: "/f.yaml", concurrency: 2, budget: { costUsd: { hard: 1 } } },
  );
});

test("JSON input: any JSON value for args, an object for a budget patch", () => {
  assert.deepEqual(parseJson("[1, 2]"), { ok: true, value: [1, 2] });
  assert.equal(parseJson("{").ok, false);
  assert.equal(parseBudgetPatch("null").ok, false);
  assert.deepEqual(parseBudgetPatch('{"tokens": null}'), { ok: true, value: { tokens: null } });
});

test("only launching server commands are refused in an untrusted workspace", () => {
  assert.equal(isRefused("piflow.run", false), true);
  assert.equal(isRefused("piflow.resume", false), true);
  assert.equal(isRefused("piflow.runWithArgs", false), true);
  assert.equal(isRefused("piflow.run", true), false);
  assert.equal(isRefused("piflow.stop", false), false);
  assert.equal(isRefused("piflow.respond", false), false);
});

test("numbers, money and budgets read short", () => {
  assert.deepEqual([0, 950, 12_300, 4_500_000].map(compactCount), ["0", "950", "12.3k", "4.5M"]);
  assert.deepEqual([0, 0.0042, 1.5].map(dollars), ["$0", "$0.0042", "$1.50"]);
  assert.equal(formatLimits({ tokens: { soft: 1000, hard: 2000 }, costUsd: { hard: 2 } }), "tokens soft 1k hard 2k, costUsd hard $2.00");
  assert.equal(formatBudgetGauge({ costUsd: { hard: 2 } }, { costUsd: 0.5 }), "costUsd $0.50/$2.00 (25%)");
  assert.equal(oneLineJson({ text: "x".repeat(300) }, 20).length, 20);
});
