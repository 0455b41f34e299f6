"""`runs.lanes(lanes)` (spec A.6): bounded parallel chains of children, and the board they report.

The worker has checked the structure with the reference's messages (limits, keys, stage params,
`resume: "previous"` only after a first stage) and sends it normalised. Here the first stage of
every lane launches as one `runs.all` batch (admitted whole), then each lane runs its remaining
stages in order while the other lanes go on. A stage is blocked when the stage before it failed or
returned `structuredOutput.verdict === "blocked"` (prose is never parsed); the rest of its lane is
`skipped`. Children are launched through `SubagentCalls`, so each is journaled under its generated
key `<lane>.<stage>` and a resumed run replays completed stages instead of running them again.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import anyio

from piflow.engine.subagents.progress import SUBAGENT_LANES
from piflow.engine.worker.boundary import malformed_call
from piflow.engine.worker.subagents_protocol import ChildItem, ChildrenCall
from piflow.errors import WorkflowError

if TYPE_CHECKING:
    from piflow.engine.subagents.calls import SubagentCalls

BOARD_TEXT_BYTES: Final = 256
"""Longest text (run id, verdict, error) a board entry keeps, as the reference bounds it."""
MAX_LANES: Final = 32
MAX_STAGES: Final = 64


@dataclass(frozen=True, slots=True)
class Stage:
    key: str
    child_key: str
    previous: bool
    """`resume: "previous"`: continue the previous stage's child (its run id)."""
    params: Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class Lane:
    key: str
    stages: tuple[Stage, ...]


def parse_lanes(data: Any) -> tuple[Lane, ...]:
    """The worker's normalised lanes as typed lanes; a shape the worker cannot send is a malformed call."""
    if not isinstance(data, list) or not 0 < len(data) <= MAX_LANES:
        raise malformed_call("runs.lanes")
    lanes: list[Lane] = []
    for lane in data:
        if not (isinstance(lane, dict) and isinstance(lane.get("key"), str) and isinstance(lane.get("stages"), list)):
            raise malformed_call("runs.lanes")
        stages: list[Stage] = []
        for index, stage in enumerate(lane["stages"]):
            if (not isinstance(stage, dict) or not isinstance(stage.get("key"), str)
                    or not isinstance(stage.get("params"), dict) or not isinstance(stage.get("previous"), bool)
                    or (index == 0 and stage["previous"])):
                raise malformed_call("runs.lanes")
            stages.append(Stage(stage["key"], f"{lane['key']}.{stage['key']}", stage["previous"], stage["params"]))
        if not stages:
            raise malformed_call("runs.lanes")
        lanes.append(Lane(lane["key"], tuple(stages)))
    if sum(len(lane.stages) for lane in lanes) > MAX_STAGES:
        raise malformed_call("runs.lanes")
    return tuple(lanes)


def _bounded(text: str) -> str:
    data = text.encode("utf-8")
    if len(data) <= BOARD_TEXT_BYTES:
        return text
    return data[: BOARD_TEXT_BYTES - 3].decode("utf-8", errors="ignore") + "..."


def _verdict(result: Mapping[str, Any]) -> Any:
    structured = result.get("structuredOutput")
    return structured.get("verdict") if isinstance(structured, dict) else None


def stage_entry(key: str, result: Mapping[str, Any]) -> dict[str, Any]:
    """The board entry of a stage that ran: completed, blocked (by its verdict) or failed."""
    ok = result.get("ok") is True
    verdict = _verdict(result)
    if result.get("stopped"):
        state = "stopped"
    elif result.get("detached"):
        state = "detached"
    elif not ok:
        state = "failed"
    else:
        state = "blocked" if verdict == "blocked" else "completed"
    entry: dict[str, Any] = {"key": key, "state": state, "ok": ok}
    run_id = result.get("runId")
    if isinstance(run_id, str) and run_id.strip():
        entry["runId"] = _bounded(run_id.strip())
    reference = result.get("outputReference")
    if isinstance(reference, str) and len(reference.encode("utf-8")) <= BOARD_TEXT_BYTES:
        entry["outputReference"] = reference
    if isinstance(verdict, str) and verdict.strip():
        entry["verdict"] = _bounded(verdict.strip())
    if state == "blocked":
        entry["error"] = "Stage returned a blocked verdict."
    elif state != "completed":
        error = result.get("error")
        entry["error"] = _bounded(error if isinstance(error, str) and error else "Stage did not complete successfully.")
    return entry


def _failed(key: str, error: WorkflowError) -> dict[str, Any]:
    """A stage whose launch was refused (unknown agent, fan-out limit): a failed child, lane-local."""
    return {"key": key, "ok": False, "output": error.message, "error": error.message, "artifactPaths": []}


class _Board:
    """The board of one `runs.lanes` call as it fills in, published whole on every change (followers
    redraw it; the last one is the result)."""

    def __init__(self, children: SubagentCalls, lanes: Sequence[Lane]) -> None:
        self._run = children.run
        self.call = children.next_lanes_call()
        self.lanes: list[dict[str, Any]] = [
            {"key": lane.key, "state": "running", "stages": [{"key": s.key, "state": "pending"} for s in lane.stages]}
            for lane in lanes
        ]

    def stage(self, lane: int, index: int, entry: dict[str, Any]) -> None:
        self.lanes[lane]["stages"][index] = entry
        self._publish(lane, entry)

    def end(self, lane: int, shown: dict[str, Any]) -> None:
        self.lanes[lane] = shown
        changed = next((s for s in shown["stages"] if s["state"] not in ("completed", "skipped")), shown["stages"][-1])
        self._publish(lane, changed)

    def _publish(self, lane: int, entry: dict[str, Any]) -> None:
        self._run.emit(SUBAGENT_LANES, {"call": self.call, "lanes": self.lanes, "lane": self.lanes[lane]["key"],
                                        "stage": entry})


async def _run_lane(children: SubagentCalls, lane: Lane, first: Mapping[str, Any], board: _Board,
                    number: int) -> dict[str, Any]:
    """One lane from its first stage's result: later stages in order until one does not complete."""
    entries: list[dict[str, Any]] = []

    def blocked(at: int, entry: dict[str, Any]) -> dict[str, Any]:
        entries.append(entry)
        entries.extend({"key": stage.key, "state": "skipped"} for stage in lane.stages[at + 1:])
        return {"key": lane.key, "state": "blocked", "failedStage": lane.stages[at].key, "stages": entries}

    previous = first
    for index, stage in enumerate(lane.stages):
        if index > 0:
            params = dict(stage.params)
            if stage.previous:
                run_id = previous.get("runId")
                if not isinstance(run_id, str) or not run_id.strip():
                    return blocked(index, {"key": stage.key, "state": "blocked",
                                           "error": "Previous stage did not return a retained run id."})
                params["resume"] = run_id.strip()
            board.stage(number, index, {"key": stage.key, "state": "running"})
            try:
                previous = await children.launch_child(stage.child_key, params)
            except WorkflowError as exc:
                previous = _failed(stage.child_key, exc)
        entry = stage_entry(stage.key, previous)
        if entry["state"] != "completed":
            return blocked(index, entry)
        entries.append(entry)
        if index + 1 < len(lane.stages):
            board.stage(number, index, entry)
    return {"key": lane.key, "state": "complete", "stages": entries}


async def run_lanes(children: SubagentCalls, data: Any) -> list[dict[str, Any]]:
    """Serve `runs.lanes`: the board, one entry per lane in the order given."""
    lanes = parse_lanes(data)
    board = _Board(children, lanes)
    batch = ChildrenCall(0, tuple(ChildItem(lane.stages[0].child_key, dict(lane.stages[0].params)) for lane in lanes),
                         True)
    for number in range(len(lanes)):
        board.stage(number, 0, {"key": lanes[number].stages[0].key, "state": "running"})
    try:
        firsts: Sequence[dict[str, Any]] = await children.launch(batch)
    except WorkflowError as exc:  # refused as a whole: no lane started
        for number in range(len(lanes)):
            board.stage(number, 0, {"key": lanes[number].stages[0].key, "state": "failed", "error": exc.message})
        raise
    result: list[dict[str, Any]] = [{} for _ in lanes]

    async def one(index: int) -> None:
        result[index] = await _run_lane(children, lanes[index], firsts[index], board, index)
        board.end(index, result[index])

    async with anyio.create_task_group() as tasks:
        for index in range(len(lanes)):
            tasks.start_soon(one, index)
    return result
