"""The pi extension the `pi` backend loads into every attempt's session (`pi -e <file>`).

pi's RPC mode streams events after the fact, so on its own it cannot hold a model turn back
for a budget check or let piflow judge a `workflow_result`. The bridge closes that gap through
pi's documented extension UI sub-protocol: each hook below opens an `input` dialog titled
`piflow:<kind>` whose `placeholder` carries a JSON payload, and pi waits until piflow answers
with an `extension_ui_response` whose `value` is JSON.

- `piflow:before_turn` — on `turn_start`, before the model is called. piflow runs the budget's
  before-turn check; when it fails piflow kills pi, so no request is sent.
- `piflow:after_turn` — on `turn_end`, after the turn's tools ran. piflow charges the turn's
  usage, judges finality and may queue the soft-limit steering message (an RPC `steer`) before
  answering, so it reaches the model before the next turn.
- `piflow:result` — the `workflow_result` tool (only with an output schema; its parameters are
  the schema). The payload is the arguments pi validated; piflow answers `{accepted, message}`.
  A rejection is thrown, so pi marks the tool result as an error; an acceptance ends the
  tool batch (`terminate`), so pi does not call the model again.
- `piflow:tools` — on `session_start`, only in a tool probe (`probe_pi_tools`): `pi.getAllTools()`
  (built-ins and extension tools, with their source), less the tools of disabled extensions.
- `piflow:tool` — a tool piflow serves (the child-agent tools of spec J.5: `agent`,
  `get_subagent_result`, `steer_subagent`), registered with piflow's names, descriptions and
  parameters. The payload is `{name, params}`; piflow runs the call through the same engine path
  as on the openai backend and answers `{text, isError}`; an error is thrown, so pi marks the
  tool result as an error.
- `piflow:system_prompt` — on `before_agent_start`, the system prompt pi assembled, with the
  skills `disabledAgentResources` names taken out (pi's CLI can only drop all skills); piflow
  records it as the attempt's effective prompt. The bridge returns that prompt to pi.

The policy's extensions: pi 0.80 loads every extension it finds, so at `session_start` (and
again before each prompt) the bridge switches off the tools those extensions registered (each
tool's `sourceInfo.path` is its extension's file; a disabled directory covers its files).

The source is kept here rather than in a `.js` file so it ships inside the Python package with
no package-data rule; it is written beside each attempt's other scratch files.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from piflow.config.resources import ResourcePolicy

if TYPE_CHECKING:
    from piflow.engine.tools import Tool

DIALOG_PREFIX: Final = "piflow:"
FILE_NAME: Final = "piflow-bridge.js"

_SOURCE: Final = """\
// Written by piflow for one attempt: gates model turns, takes workflow_result and serves piflow's tools.
import { realpathSync } from "node:fs";

const CONFIG = __CONFIG__;

async function ask(ctx, kind, payload) {
  const answer = await ctx.ui.input(CONFIG.prefix + kind, JSON.stringify(payload === undefined ? null : payload));
  return answer === undefined ? {} : JSON.parse(answer);
}

const escapeXml = (text) => text.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;")
  .replace(/"/g, "&quot;").replace(/'/g, "&apos;");

function realPath(path) {
  try { return realpathSync(path); } catch { return path; }
}

function disabledExtension(path) {
  const real = realPath(path);
  return CONFIG.disabledExtensions.some((off) => real === off || real.startsWith(off + "/"));
}

// pi's formatSkillsForPrompt lists each skill as this block; a disabled one is cut out, and the
// whole list when no visible skill is left.
function withoutDisabledSkills(prompt, skills) {
  const off = new Set(CONFIG.disabledSkills);
  const visible = (skills || []).filter((skill) => !skill.disableModelInvocation);
  for (const skill of visible.filter((s) => off.has(s.name))) {
    prompt = prompt.replace(["  <skill>", `    <name>${escapeXml(skill.name)}</name>`,
      `    <description>${escapeXml(skill.description)}</description>`,
      `    <location>${escapeXml(skill.filePath)}</location>`, "  </skill>", ""].join("\\n"), "");
  }
  if (visible.length > 0 && visible.every((s) => off.has(s.name))) {
    const start = prompt.indexOf("\\n\\nThe following skills provide specialized instructions");
    const end = prompt.indexOf("</available_skills>", start);
    if (start >= 0 && end >= 0) prompt = prompt.slice(0, start) + prompt.slice(end + "</available_skills>".length);
  }
  return prompt;
}

function switchOffDisabledTools(pi) {
  if (CONFIG.disabledExtensions.length === 0) return;
  const off = new Set(pi.getAllTools().filter((tool) => disabledExtension(tool.sourceInfo.path)).map((t) => t.name));
  const active = pi.getActiveTools();
  if (active.some((name) => off.has(name))) pi.setActiveTools(active.filter((name) => !off.has(name)));
}

export default function piflowBridge(pi) {
  pi.on("session_start", async (_event, ctx) => {
    switchOffDisabledTools(pi);
    if (CONFIG.reportTools) {
      const tools = pi.getAllTools().filter((tool) => !disabledExtension(tool.sourceInfo.path))
        .map((tool) => ({ name: tool.name, source: tool.sourceInfo.source, path: tool.sourceInfo.path }));
      await ask(ctx, "tools", tools);
    }
  });
  pi.on("before_agent_start", async (event, ctx) => {
    switchOffDisabledTools(pi);
    const prompt = withoutDisabledSkills(event.systemPrompt, event.systemPromptOptions.skills);
    await ask(ctx, "system_prompt", prompt);
    return prompt === event.systemPrompt ? undefined : { systemPrompt: prompt };
  });
  pi.on("turn_start", async (_event, ctx) => {
    await ask(ctx, "before_turn");
  });
  pi.on("turn_end", async (_event, ctx) => {
    await ask(ctx, "after_turn");
  });
  for (const tool of CONFIG.tools) {
    pi.registerTool({
      name: tool.name,
      label: tool.name,
      description: tool.description,
      parameters: tool.parameters,
      async execute(_toolCallId, params, _signal, _onUpdate, ctx) {
        const answer = await ask(ctx, "tool", { name: tool.name, params });
        if (answer.isError) throw new Error(answer.text);
        return { content: [{ type: "text", text: answer.text }], details: {} };
      },
    });
  }
  if (CONFIG.result !== null) {
    pi.registerTool({
      name: CONFIG.result.name,
      label: "Workflow result",
      description: CONFIG.result.description,
      parameters: CONFIG.result.schema,
      async execute(_toolCallId, params, _signal, _onUpdate, ctx) {
        const verdict = await ask(ctx, "result", params);
        if (!verdict.accepted) throw new Error(verdict.message);
        return { content: [{ type: "text", text: verdict.message }], details: {}, terminate: true };
      },
    });
  }
}
"""


def write_bridge(
    directory: Path, result_tool: str, description: str, schema: dict[str, Any] | None,
    resources: ResourcePolicy, *, report_tools: bool = False, tools: Sequence[Tool] = (),
) -> Path:
    """Write the bridge for one attempt; `schema` None means no `workflow_result` tool; `resources`
    is the agent's disabledAgentResources policy; `report_tools` makes it a tool probe; `tools` are
    the tools piflow serves through `piflow:tool`."""
    result = None if schema is None else {"name": result_tool, "description": description, "schema": schema}
    served = [{"name": tool.name, "description": tool.description, "parameters": tool.parameters} for tool in tools]
    config = json.dumps({"prefix": DIALOG_PREFIX, "result": result, "disabledSkills": list(resources.skills),
                         "disabledExtensions": list(resources.extensions), "reportTools": report_tools,
                         "tools": served})
    path = directory / FILE_NAME
    path.write_text(_SOURCE.replace("__CONFIG__", config, 1), encoding="utf-8")
    return path
