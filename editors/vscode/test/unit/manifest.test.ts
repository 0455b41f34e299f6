// package.json contributions agree with the code: commands, menus, settings, language, trust.

import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Command } from "../../src/commands";
import { ServerCommand } from "../../src/protocol";
import { SECTION } from "../../src/settings";
import { RUNS_VIEW_ID } from "../../src/statusBar";

const root = join(__dirname, "..", "..", "..");

interface Manifest {
  main: string;
  activationEvents: string[];
  capabilities: { untrustedWorkspaces: { supported: string; restrictedConfigurations: string[] } };
  contributes: {
    languages: { id: string; filenamePatterns: string[]; configuration: string }[];
    grammars: { language: string; scopeName: string; path: string }[];
    commands: { command: string; title: string }[];
    menus: Record<string, { command: string; when?: string }[]>;
    views: Record<string, { id: string; name: string }[]>;
    configuration: { properties: Record<string, { default?: unknown }> };
  };
}

const manifest = JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as Manifest;

test("every command the code registers is contributed, and none clashes with a server command", () => {
  const contributed = manifest.contributes.commands.map((c) => c.command).sort();
  assert.deepEqual(contributed, Object.values(Command).sort());
  const serverCommands: string[] = Object.values(ServerCommand);
  for (const id of contributed) assert.ok(!serverCommands.includes(id), `${id} is the server's`);
});

test("menus only name contributed commands", () => {
  const contributed = new Set(manifest.contributes.commands.map((c) => c.command));
  for (const [menu, items] of Object.entries(manifest.contributes.menus)) {
    for (const item of items) assert.ok(contributed.has(item.command), `${menu}: ${item.command}`);
  }
});

test("the settings read by the code are contributed with defaults", () => {
  const properties = manifest.contributes.configuration.properties;
  for (const key of [
    "server.command",
    "server.pythonPath",
    "trace.server",
    "files",
    "run.backend",
    "run.fixtures",
    "run.concurrency",
    "run.budget",
    "approvals.notify",
  ]) {
    assert.ok(`${SECTION}.${key}` in properties, key);
    assert.ok("default" in (properties[`${SECTION}.${key}`] ?? {}), `${key} has a default`);
  }
});

test("*.workflow.js is its own language with a grammar that embeds JavaScript", () => {
  const [language] = manifest.contributes.languages;
  assert.equal(language?.id, "piflow-workflow");
  assert.deepEqual(language.filenamePatterns, ["*.workflow.js"]);
  const [grammar] = manifest.contributes.grammars;
  const tm = JSON.parse(readFileSync(join(root, grammar?.path ?? ""), "utf8")) as { scopeName: string; patterns: unknown };
  assert.equal(tm.scopeName, grammar?.scopeName);
  assert.deepEqual(tm.patterns, [{ include: "source.js" }]);
  JSON.parse(readFileSync(join(root, language.configuration), "utf8"));
  assert.ok(manifest.activationEvents.includes("onLanguage:piflow-workflow"));
});

test("the runs view exists and untrusted workspaces are supported in a limited way", () => {
  const views = Object.values(manifest.contributes.views).flat();
  assert.ok(views.some((v) => v.id === RUNS_VIEW_ID && v.name === "Workflow Runs"));
  const trust = manifest.capabilities.untrustedWorkspaces;
  assert.equal(trust.supported, "limited");
  assert.ok(trust.restrictedConfigurations.includes("piflow.server.command"));
  assert.ok(trust.restrictedConfigurations.includes("piflow.server.pythonPath"));
  assert.equal(manifest.main, "./dist/extension.js");
});
