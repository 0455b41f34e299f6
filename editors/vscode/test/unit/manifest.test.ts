// package.json contributions agree with the code: commands, menus, settings, language, trust.

import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import { Command } from "../../src/commands";
import { ServerCommand } from "../../src/protocol";
import { SCRIPTS_CONTEXT_KEY, TYPESCRIPT_PLUGIN } from "../../src/scripts";
import { SECTION } from "../../src/settings";
import { RUNS_VIEW_ID } from "../../src/statusBar";

const root = join(__dirname, "..", "..", "..");

interface Manifest {
  main: string;
  dependencies: Record<string, string>;
  activationEvents: string[];
  capabilities: { untrustedWorkspaces: { supported: string; restrictedConfigurations: string[] } };
  contributes: {
    languages?: unknown;
    typescriptServerPlugins: { name: string; enableForWorkspaceTypeScriptVersions: boolean }[];
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

test("workflow scripts stay JavaScript: no language of piflow's own, Run menus by file name or the scripts context key", () => {
  assert.equal(manifest.contributes.languages, undefined);
  assert.deepEqual(manifest.activationEvents, ["workspaceContains:**/*.workflow.js", "workspaceContains:**/piflow.toml"]);
  for (const menu of ["editor/title/run", "explorer/context"]) {
    for (const item of manifest.contributes.menus[menu] ?? []) {
      assert.equal(
        item.when,
        `(resourceFilename =~ /\\.workflow\\.js$/ || resourcePath in ${SCRIPTS_CONTEXT_KEY}) && isWorkspaceTrusted`,
      );
    }
  }
});

test("the TypeScript plugin ships inside the extension and is registered with the TypeScript service", () => {
  assert.deepEqual(manifest.contributes.typescriptServerPlugins, [
    { name: TYPESCRIPT_PLUGIN, enableForWorkspaceTypeScriptVersions: true },
  ]);
  // The only runtime dependency (the client is bundled), copied into node_modules (.npmrc install-links).
  assert.deepEqual(manifest.dependencies, { [TYPESCRIPT_PLUGIN]: "file:../typescript-plugin" });
  const plugin = JSON.parse(readFileSync(join(root, "..", "typescript-plugin", "package.json"), "utf8")) as { name: string };
  assert.equal(plugin.name, TYPESCRIPT_PLUGIN);
  assert.match(readFileSync(join(root, ".npmrc"), "utf8"), /^install-links=true$/m);
  const listed = spawnSync(join(root, "node_modules", ".bin", "vsce"), ["ls"], {
    cwd: root,
    encoding: "utf8",
    timeout: 60_000,
  });
  assert.equal(listed.status, 0, listed.stderr);
  const files = listed.stdout.split("\n").filter(Boolean);
  for (const file of ["index.js", "package.json", "piflow-workflow.d.ts"]) {
    assert.ok(files.includes(`node_modules/${TYPESCRIPT_PLUGIN}/${file}`), `the .vsix holds ${file}:\n${files.join("\n")}`);
  }
  assert.ok(!files.some((file) => file.startsWith("node_modules/vscode-languageclient/")), "the bundled client is not shipped twice");
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
