"""Short documentation of the workflow primitives and thinking levels, shown by hover and completion.

One table, so the hover text of `agent` and the documentation of its completion snippet never
disagree. The wording follows spec A (what a script author needs; not the host's internals).
Option keys are documented beside the engine's key lists, in `piflow.analysis.option_keys`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True)
class Primitive:
    name: str
    signature: str
    summary: str
    snippet: str
    """An LSP snippet (`$1`, `${2:placeholder}`) inserted by completion."""


PRIMITIVES: Final[dict[str, Primitive]] = {
    item.name: item
    for item in (
        Primitive(
            "agent",
            "agent(prompt: string, options?: AgentOptions): Promise<string | any>",
            "Runs one agent and resolves to its final answer (the `outputSchema` value when one is given). "
            "A completed agent is journaled: on resume it returns its recorded value without running again.",
            'await agent("${1:prompt}", { label: "${2:label}" })',
        ),
        Primitive(
            "conversation",
            "conversation(name: string, options?: AgentOptions): { run(prompt, { timeoutMs?, retries? }?) }",
            "A named agent session that keeps its transcript across `run()` turns; each turn is journaled.",
            'const ${1:chat} = conversation("${2:name}", { model: "${3}" });',
        ),
        Primitive(
            "parallel",
            "parallel(name: string, tasks: Record<string, () => Promise<any>>): Promise<Record<string, any>>",
            "Starts every task at once and resolves to their values by task name; the first failure in "
            "record order is rethrown after all have settled.",
            'await parallel("${1:name}", {\n\t${2:task}: () => agent("${3:prompt}"),\n})',
        ),
        Primitive(
            "pipeline",
            "pipeline(name: string, items: Record<string, any>, stages: Record<string, (value) => Promise<any>>)",
            "Runs every item through the stages in order (items concurrently) and resolves to each item's "
            "final value.",
            'await pipeline("${1:name}", { ${2:item}: ${3:value} }, {\n'
            "\t${4:stage}: (value) => agent(`${5:prompt} ${value}`),\n})",
        ),
        Primitive(
            "checkpoint",
            'checkpoint({ name: string, prompt: string, context: any }): Promise<"approved" | "rejected">',
            "Waits for a person to approve or reject (from the editor, `piflow approve`, or any client). "
            "The answer is journaled; a resumed run does not ask again.",
            'await checkpoint({ name: "${1:name}", prompt: "${2:Proceed?}", context: ${3:null} })',
        ),
        Primitive(
            "phase",
            "phase(name: string): Promise<void>",
            "Names the stage the run is in (shown in progress views); waits while the run is paused.",
            'await phase("${1:name}");',
        ),
        Primitive(
            "withWorktree",
            "withWorktree(name?: string, callback: () => Promise<any>): Promise<any>",
            "Runs the agents of the callback in a git worktree of their own (created when the first agent "
            "starts); the same name shares one worktree.",
            'await withWorktree("${1:name}", async () => {\n\t$0\n})',
        ),
        Primitive(
            "log",
            "log(message: string): Promise<void>",
            "Adds a line to the run's log (shown by editors and `piflow show`; never sent to a model).",
            'log("${1:message}");',
        ),
        Primitive(
            "prompt",
            "prompt(template: string, values: object): string",
            "Fills `{name}` placeholders from `values` (strings raw, anything else as JSON); every "
            "placeholder must have a value and every value must be used. `{{` and `}}` are literal braces.",
            'prompt("${1:template {value\\}}", { ${2:value} })',
        ),
    )
}

THINKING_DOCS: Final[dict[str, str]] = {
    "off": "No extended reasoning.",
    "minimal": "The least reasoning the model supports.",
    "low": "Light reasoning.",
    "medium": "Moderate reasoning.",
    "high": "Deep reasoning.",
    "xhigh": "Very deep reasoning, where the model supports it.",
    "max": "The most reasoning the model supports.",
}


def primitive_markdown(primitive: Primitive) -> str:
    return f"```ts\n{primitive.signature}\n```\n\n{primitive.summary}"

