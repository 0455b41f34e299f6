"""The `scripted` backend: deterministic answers from a fixture file, for demos, tests and CI."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from piflow.config.files import CONFIG_LIMIT, FileRefused, InvalidUtf8, read_text
from piflow.engine.backends.base import AttemptControl, AttemptRequest, Usage
from piflow.errors import ERROR_CODES, WorkflowError

_MATCH_KEYS = frozenset({"label", "role", "model", "prompt", "key", "agent", "task"})
"""`key`, `agent` and `task` name a pi-subagents child (its workflow key, agent and task pattern)."""
_RULE_KEYS = frozenset({
    "match", "text", "json", "fail", "times", "latencyMs", "tokens", "costUsd", "toolCalls", "spawn", "steer",
})
_DEFAULT_KEYS = frozenset({"latencyMs", "tokens", "costUsd"})

CHOSEN_RULE: ContextVar[int | None] = ContextVar("CHOSEN_RULE", default=None)
"""The fixture rule an executor chose for the attempt running in this context (-1: none matched),
when the run's `times` counts live elsewhere: on Temporal the run's workflow keeps them, so a
`times: 1` rule answers once per run, not once per worker (`temporal/step.py`)."""


@dataclass
class _Rule:
    index: int
    match: dict[str, Any]
    prompt_pattern: re.Pattern[str] | None
    answer: dict[str, Any]
    times: int | None


@dataclass
class Fixtures:
    """A parsed fixture file: defaults plus ordered response rules (first match wins)."""

    latency_ms: float = 0
    tokens: dict[str, int] | None = None
    cost_usd: float = 0.0
    rules: list[_Rule] = field(default_factory=list)
    used: dict[int, int] = field(default_factory=dict)
    """How many answers each rule (by index) gave through `answer_for`."""

    @classmethod
    def load(cls, path: str | Path) -> Fixtures:
        path = Path(path)
        try:
            text = read_text(path, CONFIG_LIMIT)
        except (FileRefused, InvalidUtf8) as exc:
            raise WorkflowError("CONFIG_ERROR", f"Cannot read scripted fixtures: {exc}") from None
        except OSError as exc:
            raise WorkflowError("CONFIG_ERROR", f"Cannot read scripted fixtures {path}: {exc.strerror}") from None
        if path.suffix == ".json":
            try:
                data = json.loads(text)
            except json.JSONDecodeError as exc:
                raise WorkflowError("CONFIG_ERROR", f"Invalid scripted fixtures {path}: {exc}") from None
        else:
            # Imported here: a run without YAML fixtures does not pay for ruamel.yaml (~15 ms).
            from ruamel.yaml import YAML
            from ruamel.yaml.error import YAMLError

            try:
                data = YAML(typ="safe", pure=True).load(text)
            except YAMLError as exc:
                raise WorkflowError("CONFIG_ERROR", f"Invalid scripted fixtures {path}: {exc}") from None
        return cls.from_json(data or {}, str(path))

    @classmethod
    def from_json(cls, data: Any, source: str = "fixtures") -> Fixtures:
        def bad(what: str) -> WorkflowError:
            return WorkflowError("CONFIG_ERROR", f"Invalid scripted fixtures {source}: {what}")

        if not isinstance(data, dict) or set(data) - {"defaults", "responses"}:
            raise bad("expected an object with defaults and responses")
        defaults = data.get("defaults") or {}
        if not isinstance(defaults, dict) or set(defaults) - _DEFAULT_KEYS:
            raise bad("defaults may contain only latencyMs, tokens and costUsd")
        fixtures = cls(
            latency_ms=_non_negative(defaults.get("latencyMs", 0), bad, "defaults.latencyMs"),
            tokens=_tokens(defaults.get("tokens"), bad, "defaults.tokens"),
            cost_usd=_non_negative(defaults.get("costUsd", 0), bad, "defaults.costUsd"),
        )
        responses = data.get("responses") or []
        if not isinstance(responses, list):
            raise bad("responses must be a list")
        for index, rule in enumerate(responses):
            where = f"responses[{index}]"
            if not isinstance(rule, dict) or set(rule) - _RULE_KEYS:
                raise bad(f"{where} may contain only {', '.join(sorted(_RULE_KEYS))}")
            match = rule.get("match") or {}
            if not isinstance(match, dict) or set(match) - _MATCH_KEYS:
                raise bad(f"{where}.match may contain only label, role, model, prompt, key, agent and task")
            if "prompt" in match and "task" in match:
                raise bad(f"{where}.match must give at most one of prompt and task (both match the task)")
            if sum(key in rule for key in ("text", "json", "fail")) > 1:
                raise bad(f"{where} must give at most one of text, json and fail")
            fail = rule.get("fail")
            if fail is not None and (
                not isinstance(fail, dict) or fail.get("code") not in ERROR_CODES or not isinstance(
                    fail.get("message"), str)
            ):
                raise bad(f"{where}.fail must be {{code, message}} with a workflow error code")
            try:
                pattern_key = "task" if "task" in match else "prompt"
                pattern = re.compile(match[pattern_key]) if pattern_key in match else None
            except re.error as exc:
                raise bad(f"{where}.match.{pattern_key} is not a valid regular expression: {exc}") from None
            times = rule.get("times")
            if times is not None and (isinstance(times, bool) or not isinstance(times, int) or times < 1):
                raise bad(f"{where}.times must be a positive integer")
            _non_negative(rule.get("latencyMs", 0), bad, f"{where}.latencyMs")
            _non_negative(rule.get("costUsd", 0), bad, f"{where}.costUsd")
            _tokens(rule.get("tokens"), bad, f"{where}.tokens")
            spawn = rule.get("spawn", [])
            if not isinstance(spawn, list) or not all(isinstance(child, dict) for child in spawn):
                raise bad(f"{where}.spawn must be a list of child agent parameters ({{prompt, label, ...}})")
            if "steer" in rule and (not isinstance(rule["steer"], str) or not spawn):
                raise bad(f"{where}.steer must be a message string, next to spawn")
            calls = rule.get("toolCalls", 0)
            if isinstance(calls, bool) or not isinstance(calls, int) or calls < 0:
                raise bad(f"{where}.toolCalls must be a non-negative integer")
            fixtures.rules.append(_Rule(index, match, pattern, rule, times))
        return fixtures

    def rule_for(self, request: AttemptRequest, used: Mapping[int, int]) -> int | None:
        """The index of the first rule that matches `request` and is not used up, given how many
        answers each rule gave so far; None when no rule answers (the defaults do)."""
        for rule in self.rules:
            if rule.times is not None and used.get(rule.index, 0) >= rule.times:
                continue
            if _matches(rule, request):
                return rule.index
        return None

    def answer_for(self, request: AttemptRequest) -> dict[str, Any]:
        chosen = CHOSEN_RULE.get()
        if chosen is not None:
            CHOSEN_RULE.set(None)  # the attempt's own: child agents it spawns choose theirs
            return self.rules[chosen].answer if 0 <= chosen < len(self.rules) else {}
        index = self.rule_for(request, self.used)
        if index is None:
            return {}
        self.used[index] = self.used.get(index, 0) + 1
        return self.rules[index].answer


def _non_negative(value: Any, bad: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise bad(f"{where} must be a non-negative number")
    return float(value)


def _tokens(value: Any, bad: Any, where: str) -> dict[str, int] | None:
    if value is None:
        return None
    if not isinstance(value, dict) or set(value) - {"input", "output"} or not all(
        isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in value.values()
    ):
        raise bad(f"{where} must be {{input, output}} with non-negative integers")
    return {"input": value.get("input", 0), "output": value.get("output", 0)}


def _matches(rule: _Rule, request: AttemptRequest) -> bool:
    match = rule.match
    if "label" in match and match["label"] != request.label:
        return False
    if "role" in match and match["role"] != request.role:
        return False
    if "model" in match and match["model"] not in (request.model.name, str(request.model)):
        return False
    if "key" in match and match["key"] != request.options.get("key"):
        return False
    if "agent" in match and match["agent"] != request.options.get("agent"):
        return False
    return rule.prompt_pattern is None or rule.prompt_pattern.search(request.task) is not None


def minimal_value(schema: Any) -> Any:
    """A small value that satisfies common JSON Schemas (the answer when no rule gives one)."""
    if not isinstance(schema, dict):
        return None
    if "const" in schema:
        return schema["const"]
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list) and schema[key]:
            return minimal_value(schema[key][0])
    if isinstance(schema.get("allOf"), list):
        merged: dict[str, Any] = {}
        for part in schema["allOf"]:
            value = minimal_value(part)
            if isinstance(value, dict):
                merged.update(value)
        return merged
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), kind[0] if kind else None)
    if kind == "object" or (kind is None and "properties" in schema):
        props = schema.get("properties") or {}
        return {name: minimal_value(props.get(name, {})) for name in schema.get("required") or []}
    if kind == "array":
        return [minimal_value(schema.get("items", {})) for _ in range(int(schema.get("minItems", 0)))]
    if kind == "string":
        return "x" * int(schema.get("minLength", 0))
    if kind in ("number", "integer"):
        low: float = schema.get("minimum", 0)
        if isinstance(schema.get("exclusiveMinimum"), (int, float)):
            low = schema["exclusiveMinimum"] + 1
        return math.ceil(low) if kind == "integer" else low
    if kind == "boolean":
        return False
    return None


async def _children(answer: dict[str, Any], request: AttemptRequest) -> list[dict[str, Any]] | None:
    """A rule's `spawn`: start every child (as the `agent` tool would), send `steer` to each, then
    wait for them in order; their `{id, ok, value|error}` results (None without `spawn`)."""
    spawn = answer.get("spawn")
    if not spawn:
        return None
    if request.children is None:
        raise WorkflowError("AGENT_FAILED", "This scripted answer spawns child agents, but the agent was not given "
                            'the "agent" tool; add it to the agent\'s tools')
    ids = [await request.children.spawn(dict(params)) for params in spawn]
    if "steer" in answer:
        for child_id in ids:
            await request.children.steer(child_id, answer["steer"])
    return [await request.children.result(child_id) for child_id in ids]


def _estimate_tokens(text: str) -> int:
    return max(1, math.ceil(len(text) / 4))


class ScriptedBackend:
    """Answers by fixture rule (label, role, model, prompt pattern), deterministically."""

    name = "scripted"

    def __init__(self, fixtures: Fixtures | None = None) -> None:
        self.fixtures = fixtures or Fixtures()
        self.steered: list[tuple[str, str, str]] = []
        """`(agent id, message, mode)` of every steer delivered (`runs.steer`), for dry runs and tests."""

    async def steer(self, agent_id: str, message: str, mode: str) -> str:
        """Record the message: a scripted attempt's answer is fixed, so delivering is all there is to do."""
        self.steered.append((agent_id, message, mode))
        return "delivered"

    async def run_attempt(self, request: AttemptRequest, control: AttemptControl) -> Any:
        answer = self.fixtures.answer_for(request)
        control.system_prompt(request.system_append or "")  # no native prompt: the role body is all of it
        control.before_turn()
        control.activity("responding")
        latency = answer.get("latencyMs", self.fixtures.latency_ms)
        if latency:
            await anyio.sleep(latency / 1000)
        for _ in range(answer.get("toolCalls", 0)):  # simulated tool calls count against tool budgets
            control.tool_call("scripted")
        outcomes = await _children(answer, request)
        if "fail" in answer:
            raise WorkflowError(answer["fail"]["code"], answer["fail"]["message"])
        if "json" in answer:
            value: Any = answer["json"]
        elif outcomes is not None:
            value = outcomes
        elif "text" in answer:
            value = str(answer["text"])
        elif request.output_schema is not None:
            value = minimal_value(request.output_schema)
        else:
            value = "[scripted] " + request.task[:80]
        rendered = value if isinstance(value, str) else json.dumps(value)
        tokens = answer.get("tokens") or self.fixtures.tokens or {
            "input": _estimate_tokens(request.prompt),
            "output": _estimate_tokens(rendered),
        }
        usage = Usage(
            input=tokens.get("input", 0),
            output=tokens.get("output", 0),
            cost_usd=float(answer.get("costUsd", self.fixtures.cost_usd)),
        )
        final = request.output_schema is None
        control.after_turn(usage, final=final)
        if request.output_schema is not None and not control.validate_result(value):
            raise WorkflowError("RESULT_INVALID", "Agent did not submit a valid workflow_result after one repair")
        return value
