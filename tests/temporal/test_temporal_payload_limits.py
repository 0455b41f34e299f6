"""Large runs within Temporal's payload limits: every payload piflow sends is compressed (and a payload
written without compression still reads), a fan-out whose journal is several times Temporal's 2 MB
payload limit completes (carried into fresh histories), and one agent output too big for Temporal
fails the run with a piflow error that says so. Real dev server and `piflow worker`s."""

from __future__ import annotations

import base64
import json
import random
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from google.protobuf.message import Message
from temporal_support import until_state
from temporalio.api.common.v1 import Payload
from temporalio.api.enums.v1 import EventType
from temporalio.converter import DataConverter
from temporalio.worker import Worker

from piflow.engine.engine import LaunchRequest
from piflow.engine.lifecycle import ENDED
from piflow.engine.temporal import codec, wire
from piflow.engine.temporal.client import TemporalRuns
from piflow.engine.temporal.settings import TemporalSettings
from piflow.engine.temporal.worker import Attempts, step
from piflow.engine.temporal.workflow import RunWorkflow
from temporal_cluster import DevServer, Workers

AGENTS = 96
TEXT_WORDS = 9800
"""Each agent answers ~64 KB of words: the journal is ~6 MB of JSON, three times Temporal's payload limit."""


def prose(rng: random.Random, vocabulary: list[str], words: int) -> str:
    """Text that zlib shrinks about as much as an agent's prose (3-4x), not the 100x of a repeated string."""
    return " ".join(rng.choice(vocabulary) for _ in range(words))


def project_with_fixtures(root: Path, rules: list[dict[str, Any]]) -> Path:
    project = root / "project"
    project.mkdir()
    (project / "fixtures.json").write_text(json.dumps({"responses": rules}))
    return project


def payloads(message: Message) -> Iterator[Payload]:
    """Every payload inside a history event."""
    for field, value in message.ListFields():
        if field.type != field.TYPE_MESSAGE or field.message_type is None:
            continue
        if field.message_type.GetOptions().map_entry:
            items = list(value.values())
        else:
            items = list(value) if field.is_repeated else [value]
        for item in items:
            if isinstance(item, Payload):
                yield item
            elif isinstance(item, Message):
                yield from payloads(item)


async def run_payloads(runs: TemporalRuns, run_id: str) -> list[tuple[int, int, bool, str]]:
    """(size as stored, size uncompressed, compressed?, event type) of every payload of every history of
    the run."""
    found = []
    async for execution in runs.client.list_workflows(f'WorkflowId = "piflow-{run_id}"'):
        history = await runs.client.get_workflow_handle(execution.id, run_id=execution.run_id).fetch_history()
        for event in history.events:
            for payload in payloads(event):
                plain = codec.decompress(payload)
                kind = EventType.Name(event.event_type).removeprefix("EVENT_TYPE_")
                found.append((payload.ByteSize(), plain.ByteSize(), plain is not payload, kind))
    return found


def settings(server: DevServer, task_queue: str) -> TemporalSettings:
    return TemporalSettings(address=server.address, task_queue=task_queue)


def test_the_codec_compresses_big_payloads_and_reads_uncompressed_ones() -> None:
    text = prose(random.Random(1), [f"w{n}" for n in range(300)], 3000).encode()
    big = Payload(metadata={"encoding": b"json/plain"}, data=json.dumps(text.decode()).encode())
    small = Payload(metadata={"encoding": b"json/plain"}, data=b'"ok"')
    packed = codec.compress(big)
    assert packed.metadata["encoding"] == codec.ENCODING and packed.ByteSize() < big.ByteSize() / 2
    assert codec.decompress(packed) == big
    assert codec.compress(small) is small, "a small payload stays readable in Temporal's UI"
    assert codec.decompress(big) is big, "a payload written without the codec reads as it is"
    bomb = Payload(metadata={"encoding": codec.ENCODING}, data=zlib.compress(bytes(codec.DECODED_LIMIT + 1)))
    with pytest.raises(ValueError, match="inflates past"):
        codec.decompress(bomb)


async def test_a_run_started_without_compression_finishes_on_compressing_workers(
    tmp_path: Path, workers: Workers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run begun by a piflow before the codec (uncompressed history) is replayed and finished by
    workers and clients with it."""
    rng = random.Random(2)
    vocabulary = [f"v{n}" for n in range(300)]
    first, second = prose(rng, vocabulary, 2000), prose(rng, vocabulary, 2000)
    project = project_with_fixtures(tmp_path, [{"match": {"label": "first"}, "text": first},
                                               {"match": {"label": "second"}, "text": second}])
    script = """
const a = await agent("first", {label: "first"});
await checkpoint({name: "go", prompt: "Go on?", context: null});
const b = await agent("second", {label: "second"});
return [a.length, b.length, a.slice(0, 12)];
"""
    request = LaunchRequest(script=script, cwd=str(project), backend="scripted",
                            fixtures=str(project / "fixtures.json"))
    monkeypatch.setattr(codec, "DATA_CONVERTER", DataConverter.default)  # the piflow before the codec
    async with TemporalRuns(settings(workers.server, workers.task_queue), str(project)) as runs, \
            Worker(runs.client, task_queue=workers.task_queue, workflows=[RunWorkflow],
                   activities=[step, Attempts(None).attempt]):
        run_id = await runs.launch(request)
        waiting = await until_state(runs, run_id, {"awaiting_input", *ENDED}, 90)
        assert waiting.state == "awaiting_input", waiting.error
        before = await run_payloads(runs, run_id)
    assert not any(compressed for _, _, compressed, _ in before)
    assert max(plain for _, plain, _, _ in before) > wire.COMPRESS_FROM, "the old history holds big payloads"

    monkeypatch.undo()
    workers.start(1)
    async with TemporalRuns(settings(workers.server, workers.task_queue), str(project)) as runs:
        assert await runs.respond(run_id, "go", True)
        final = await until_state(runs, run_id, ENDED, 90)
        after = await run_payloads(runs, run_id)
    assert (final.state, final.result) == ("completed", [len(first), len(second), first[:12]]), final.error
    assert any(compressed for _, _, compressed, _ in after), "the upgraded workers compress what they add"


async def test_a_fan_out_whose_journal_is_several_times_the_payload_limit_completes(
    tmp_path: Path, workers: Workers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wire, "HISTORY_LIMIT", 150)  # the run carries its journal into fresh histories
    rng = random.Random(3)
    vocabulary = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 10)))
                  for _ in range(300)]
    texts = [prose(rng, vocabulary, TEXT_WORDS) for _ in range(AGENTS // 2)]
    rules = [{"match": {"prompt": f"^part ({n}|{n + len(texts)})$"}, "text": text} for n, text in enumerate(texts)]
    project = project_with_fixtures(tmp_path, rules)
    journal_bytes = sum(len(json.dumps(texts[n % len(texts)])) for n in range(AGENTS))
    assert journal_bytes > 3 * wire.PAYLOAD_LIMIT
    script = f"""
const outputs = Array.from({{length: {AGENTS}}}, (_, n) => agent(`part ${{n}}`, {{label: `a${{n}}`}}));
return (await Promise.all(outputs)).map((text) => text.length);
"""
    workers.start(2)
    async with TemporalRuns(settings(workers.server, workers.task_queue), str(project)) as runs:
        run_id = await runs.launch(LaunchRequest(script=script, cwd=str(project), backend="scripted",
                                                 fixtures=str(project / "fixtures.json"), concurrency=16))
        final = await until_state(runs, run_id, ENDED, 240)
        sizes = await run_payloads(runs, run_id)
        chain = sum([1 async for _ in runs.client.list_workflows(f'WorkflowId = "piflow-{run_id}"')])
    assert final.state == "completed", (final.error, workers.logs())
    assert final.result == [len(texts[n % len(texts)]) for n in range(AGENTS)]
    assert final.usage["agentLaunches"] == AGENTS, "no agent ran twice across the histories"
    assert chain >= 2, "the journal was carried into a fresh history"
    largest: dict[str, tuple[int, int]] = {}
    for stored, plain, _, kind in sizes:
        largest[kind] = max(largest.get(kind, (0, 0)), (stored, plain), key=lambda size: size[1])
    print(f"\njournal {journal_bytes / 2**20:.2f} MiB of JSON, {chain} histories; largest payloads (as sent / "
          "uncompressed, KiB): " + ", ".join(f"{kind} {stored >> 10}/{plain >> 10}"
                                           for kind, (stored, plain) in sorted(largest.items())))
    assert max(plain for _, plain, _, _ in sizes) > wire.PAYLOAD_LIMIT, "uncompressed, the carried journal is too big"
    assert max(stored for stored, _, _, _ in sizes) < wire.PAYLOAD_LIMIT
    assert largest["MARKER_RECORDED"][1] < wire.PAYLOAD_LIMIT / 8, "steps return references, not the outputs"


async def test_a_run_too_big_to_carry_goes_on_in_its_history_and_fails_clearly_at_its_ceiling(
    tmp_path: Path, workers: Workers, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A journal past 2 MiB even compressed cannot continue as new: the run goes on in its history (and
    completes), or, when that history reaches its ceiling, fails saying why; Temporal never refuses it."""
    monkeypatch.setattr(wire, "HISTORY_LIMIT", 60)
    rng = random.Random(5)
    outputs = [base64.b64encode(rng.randbytes(48 * 1024)).decode() for _ in range(48)]  # barely compressible
    rules = [{"match": {"prompt": f"^part {n}$"}, "text": text} for n, text in enumerate(outputs)]
    project = project_with_fixtures(tmp_path, rules)
    script = """
const outputs = Array.from({length: 48}, (_, n) => agent(`part ${n}`, {label: `a${n}`}));
return (await Promise.all(outputs)).map((text) => text.length);
"""
    request = LaunchRequest(script=script, cwd=str(project), backend="scripted",
                            fixtures=str(project / "fixtures.json"), concurrency=16)
    workers.start(2)
    async with TemporalRuns(settings(workers.server, workers.task_queue), str(project)) as runs:
        going_on = await runs.launch(request)
        monkeypatch.setattr(wire, "HISTORY_CEILING", 150)
        at_ceiling = await runs.launch(request)
        completed = await until_state(runs, going_on, ENDED, 240)
        failed = await until_state(runs, at_ceiling, ENDED, 240)
        chain = sum([1 async for _ in runs.client.list_workflows(f'WorkflowId = "piflow-{going_on}"')])
    assert (completed.state, completed.result) == ("completed", [len(text) for text in outputs]), completed.error
    assert chain == 1, "the state was too big to carry: the run stayed in its history"
    assert failed.state == "failed" and failed.error is not None, failed
    assert failed.error["code"] == "RPC_LIMIT_EXCEEDED", failed.error
    assert re.search(r"the run's state \(\d+ journaled operations\) takes 2\.\d\d MiB compressed, more than the "
                     r"2\.00 MiB .* its history is full", failed.error["message"]), failed.error


RANDOM_PROMPT = """
let x = 7;
const chars = [];
for (let i = 0; i < 2000000; i++) {
  x ^= x << 13; x ^= x >>> 17; x ^= x << 5;
  chars.push(String.fromCharCode(33 + ((x >>> 8) % 90)));
}
return await agent(chars.join(""), {label: "huge"});
"""


@pytest.mark.parametrize(("script", "what"), [
    ('return (await agent("dump", {label: "huge"})).length', "the output of agent huge"),
    (RANDOM_PROMPT, "the prompt of agent huge"),
], ids=["output", "prompt"])
async def test_one_agent_too_big_for_temporal_fails_the_run_with_a_clear_error(
    tmp_path: Path, workers: Workers, script: str, what: str
) -> None:
    huge = base64.b64encode(random.Random(4).randbytes(2 * 1024 * 1024)).decode()  # ~2 MiB compressed
    project = project_with_fixtures(tmp_path, [{"match": {"label": "huge"}, "text": huge}])
    workers.start(1)
    async with TemporalRuns(settings(workers.server, workers.task_queue), str(project)) as runs:
        run_id = await runs.launch(LaunchRequest(script=script, cwd=str(project), backend="scripted",
                                                 fixtures=str(project / "fixtures.json")))
        final = await until_state(runs, run_id, ENDED, 90)
    assert final.state == "failed", final
    assert final.error is not None and final.error["code"] == "RPC_LIMIT_EXCEEDED", final.error
    assert re.match(rf"{what} takes \d\.\d\d MiB compressed, more than the 1\.00 MiB one agent's prompt or output "
                    r"may take in a run on Temporal \(whose payloads stop at 2\.00 MiB\); have agents write large "
                    "results to files", final.error["message"]), final.error
