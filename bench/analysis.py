# ruff: noqa: E501  (the generated JavaScript lines are long on purpose, as in real scripts)
"""Analysis latency: full `analyze`, re-analysis after a one-character edit, and `preflight` (DESIGN 11).

Run `python bench/analysis.py`. For generated realistic scripts of 100, 1,000 and 5,000 lines
(whole stages, padded to the exact size, so every script is valid) it prints the median (and, in
parentheses, the minimum) of the runs of: a raw tree-sitter parse (the floor), full `analyze` (a
new document and its findings, as on opening a file), `free` (releasing that document and its
findings afterwards, which nobody waits for but is CPU time), `analyze` after a one-character edit,
and `preflight` with the exact syntax check (what launch, resume and save pay). Each operation's
result is released after the clock stops. The same script with one broken line is measured separately (`broken`): it
times error recovery, not the normal path. So is the same script with an unclosed block a third of the way down
(`unclosed`, `if (ready) {` never closed: the rest of the file is one statement with an error), where `incremental`
types in the middle of the swallowed statements and `header` in the unclosed block's own line. And the valid script
with its body wrapped in one `try { ... } catch` (`wrapped`): one large clean statement, typed in the middle of.
Bars: 1,000 lines full <= 25 ms and incremental <= 10 ms, 5,000 lines full <= 150 ms.

Wall time on a shared machine is noisy; `--instructions` counts instructions instead (valgrind's
callgrind, deterministic whatever the load): per operation, a raw parse, the document (parse and
line index), the facts walk, the rules, full `analyze` (and as a multiple of the parse), the
re-analysis after a one-character edit, and `preflight` (each count includes releasing what the
operation made). To compare
two trees in wall time on a loaded machine, `--against DIR` (a copy of an older `src/`) measures
both in alternating rounds (separate processes), so both see the same load.
"""

from __future__ import annotations

import argparse
import compileall
import itertools
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import tree_sitter_javascript
from tree_sitter import Language, Parser

from piflow.analysis import Capabilities, Finding, ScriptDocument, analyze_document, preflight
from piflow.analysis.dialects import detect_dialect
from piflow.errors import WorkflowError

CAPABILITIES = Capabilities.create(
    models=["openai/gpt-5.1", "anthropic/claude-sonnet-4.5"],
    tools=["read", "grep", "find", "edit", "bash"],
    agent_types=["reviewer", "scout"],
    model_aliases={"fast": "openai/gpt-5.1", "smart": "anthropic/claude-sonnet-4.5:high"},
)
BARS = {(1000, "full"): 25.0, (1000, "incremental"): 10.0, (5000, "full"): 150.0}


def stage(index: int) -> str:
    """One realistic stage (~30 lines): research fan-out, a pipeline, a checkpoint."""
    return f"""// ---- stage {index}: research, implement, verify ----
phase("stage-{index}");
const research{index} = await parallel("research-{index}", {{
  api: () => agent(prompt("Inspect the API surface for area {{area}}", {{ area: "api-{index}" }}), {{ role: "reviewer", outputSchema: findingSchema }}),
  ui: () => agent(prompt("Inspect the UI for area {{area}}", {{ area: "ui-{index}" }}), {{ model: "smart", tools: ["read", "grep"], label: "UI {index}" }}),
  tests: () => agent("List failing tests for stage {index}", {{ model: "openai/gpt-5.1", tools: ["read", "grep", "find"], retries: 1, timeoutMs: 60000 }}),
  docs: async () => {{
    const outline = await agent("Outline docs for stage {index}", {{ role: "scout" }});
    return agent(prompt("Expand {{outline}}", {{ outline }}), {{ model: "fast", thinking: "low" }});
  }},
}});
const processed{index} = await pipeline("process-{index}", {{ api: "api-{index}", ui: "ui-{index}" }}, {{
  analyze: (item) => agent(prompt("Analyze {{item}}", {{ item }}), {{ model: "anthropic/claude-sonnet-4.5:high" }}),
  fix: (analysis) => withWorktree("fix-{index}", () => agent(prompt("Fix {{analysis}}", {{ analysis }}), {{ tools: ["read", "edit", "bash"] }})),
  verify: (fix) => agent(prompt("Verify {{fix}}", {{ fix }}), {{ role: "reviewer", retries: 2 }}),
}});
state["stage{index}"] = {{ research: research{index}, processed: processed{index} }};
if (Object.keys(processed{index}).length > 1) {{
  const approved{index} = await checkpoint({{ name: "stage-{index}", prompt: "Continue after stage {index}?", context: {{ stage: {index} }} }});
  if (approved{index} !== "approved") {{
    log("stopping after stage {index}");
    return state;
  }}
}}
const review{index} = conversation("review-{index}", {{ role: "reviewer" }});
await review{index}.run(prompt("Review stage {{n}}", {{ n: {index} }}));
for (const key of Object.keys(research{index})) {{
  log(`stage {index} ${{key}} done`);
}}
"""


HEAD = (
    'export const meta = { name: "generated", description: "Generated realistic workflow" };\n'
    "const findingSchema = {\n"
    '  type: "object",\n'
    '  properties: { summary: { type: "string" }, findings: { type: "array", items: { type: "string" } } },\n'
    '  required: ["summary", "findings"],\n'
    "};\n"
    "const state = {};\n"
)


def script(lines: int) -> str:
    """A valid script of exactly `lines` lines: whole stages, then `log` lines, then `return state;`."""
    text = HEAD
    count = HEAD.count("\n")
    index = 0
    while count + (block := stage(index)).count("\n") < lines:
        text += block
        count += block.count("\n")
        index += 1
    text += "".join(f'log("padding {n}");\n' for n in range(lines - count - 1))
    return text + "return state;\n"


def broken(text: str) -> str:
    """`text` with its middle line replaced by a syntax error."""
    rows = text.split("\n")
    rows[len(rows) // 2] = "const = ;"
    return "\n".join(rows)


UNCLOSED = "if (ready) {"


def unclosed(text: str) -> str:
    """`text` with `if (ready) {` (never closed) before the first statement a third of the way down, a
    padding line dropped to keep the size: a missing `}` makes the rest of the file one statement."""
    rows = text.split("\n")
    at = len(rows) // 3
    while not rows[at].startswith(("const ", "phase(")):
        at += 1
    rows.insert(at, UNCLOSED)
    rows.remove(next(row for row in reversed(rows) if row.startswith('log("padding ')))
    return "\n".join(rows)


def wrapped(text: str) -> str:
    """`text` with everything after its `meta` line inside one `try { ... } catch (error) { throw error; }`,
    two padding lines dropped to keep the size: a valid script whose body is one large statement."""
    rows = text.split("\n")
    for _ in range(2):
        rows.remove(next(row for row in reversed(rows) if row.startswith('log("padding ')))
    return "\n".join([rows[0], "try {", *rows[1:-1], "} catch (error) { throw error; }", rows[-1]])


VARIANTS = {
    "valid": script,
    "broken": lambda lines: broken(script(lines)),
    "unclosed": lambda lines: unclosed(script(lines)),
    "wrapped": lambda lines: wrapped(script(lines)),
}


def samples_ms(action: Callable[[], object], runs: int) -> list[float]:
    """The milliseconds each run of `action` takes to return its result (a document, a tree): what the
    caller waits for. Releasing the result is left out (`free` times it on its own)."""
    samples = []
    for _ in range(runs):
        start = time.perf_counter()
        result = action()
        samples.append((time.perf_counter() - start) * 1000)
        del result
    return samples


def free_ms(text: str, runs: int) -> list[float]:
    """The milliseconds releasing an analysed document takes (its tree, facts and findings): work the
    server does after publishing, or never (`piflow check` exits), but CPU time all the same."""
    samples = []
    for _ in range(runs):
        document = ScriptDocument(text)
        findings = analyze_document(document, CAPABILITIES)
        start = time.perf_counter()
        del document, findings
        samples.append((time.perf_counter() - start) * 1000)
    return samples


def analysed(text: str) -> tuple[ScriptDocument, list[Finding]]:
    """A new document of `text` and its findings (full `analyze`, as on opening a file)."""
    document = ScriptDocument(text)
    return document, analyze_document(document, CAPABILITIES)


class Timing(NamedTuple):
    """Milliseconds: the median of the runs (what bars compare) and the fastest (the least disturbed
    by a shared machine)."""

    median: float
    best: float

    @classmethod
    def of(cls, samples: list[float]) -> Timing:
        return cls(statistics.median(samples), min(samples))


def measure(text: str, runs: int, with_preflight: bool) -> dict[str, Timing]:
    return {kind: Timing.of(samples) for kind, samples in sample(text, runs, with_preflight).items()}


def sample(text: str, runs: int, with_preflight: bool) -> dict[str, list[float]]:
    """The milliseconds of each run of each operation."""
    parser = Parser(Language(tree_sitter_javascript.language()))
    data = text.encode()
    analyze_document(ScriptDocument(text), CAPABILITIES)  # (warm: imports, caches)
    results = {"parse": samples_ms(lambda: parser.parse(data), runs)}
    results["full"] = samples_ms(lambda: analysed(text), runs)
    results["free"] = free_ms(text, runs)
    rows = text.split("\n")
    results["incremental"] = keystroke_samples(text, len(rows) // 2, runs)
    if UNCLOSED in rows:
        results["header"] = keystroke_samples(text, rows.index(UNCLOSED), runs)
    if with_preflight:
        # A fresh text each run (a trailing comment), so the syntax verdict cache never answers.
        fresh = (f"{text}// run {n}\n" for n in itertools.count())
        results["preflight"] = samples_ms(lambda: preflighted(next(fresh)), max(3, runs // 5))
    return results


def keystroke(line: int, text: str) -> tuple[int, int]:
    """Where `incremental` types in `line`: after its first quote (or its first parenthesis)."""
    row = text.split("\n")[line]
    quote = row.find('"')
    return line, quote + 1 if quote >= 0 else max(row.find("(") + 1, 0)


def keystroke_samples(text: str, line: int, runs: int) -> list[float]:
    """`analyze` of an open document after typing one character at `keystroke(line)`, then deleting it."""
    document = ScriptDocument(text)
    analyze_document(document, CAPABILITIES)
    line, column = keystroke(line, text)
    toggle = [True]

    def edit() -> None:
        if toggle[0]:
            document.apply_change(line, column, line, column, "x")
        else:
            document.apply_change(line, column, line, column + 1, "")
        toggle[0] = not toggle[0]
        analyze_document(document, CAPABILITIES)

    return samples_ms(edit, runs)


def preflighted(text: str) -> str | None:
    """`preflight` of `text`: its error message, if it has one (the broken variants do)."""
    try:
        preflight(text, CAPABILITIES)
    except WorkflowError as error:
        return error.message
    return None


def check_valid(text: str) -> None:
    """The generated script must be what it claims: no syntax finding, and preflight accepts it."""
    syntax = [f for f in analyze_document(ScriptDocument(text), CAPABILITIES) if f.code == "INVALID_SYNTAX"]
    if syntax:
        raise SystemExit(f"generated script is not valid: {syntax[0].message}")
    preflight(text, CAPABILITIES)


def report(label: str, results: dict[str, Timing], lines: int, bars: bool = True) -> bool:
    """One line: median (min) of each timing, its bar's verdict, and full `analyze` as a multiple of
    the raw parse (issue 15's target: about 3x)."""
    failed = False
    parts = []
    for kind, value in results.items():
        bar = BARS.get((lines, kind)) if bars else None
        verdict = "" if bar is None else (" ok" if value.median <= bar else f" OVER {bar:.0f} ms")
        failed = failed or (bar is not None and value.median > bar)
        parts.append(f"{kind} {value.median:7.2f} ({value.best:6.2f}) ms{verdict}")
    full, parse = results["full"], results["parse"]
    ratios = f"full/parse {full.median / parse.median:4.1f}x ({full.best / parse.best:4.1f}x)"
    print(f"{lines:>5} lines {label:>6}: " + " | ".join(parts) + f" | {ratios}")
    return failed


PHASES = ("none", "parse", "document", "facts", "full", "incremental", "header", "preflight")


def run_phase(phase: str, lines: int, repeats: int, variant: str) -> None:
    """What `--instructions` counts: the set-up (script, imports, an analysed open document, one
    preflight), then `repeats` times the phase's operation; phase `none` is the set-up alone.
    `header` types in the unclosed block's line (the `unclosed` variant), `incremental` in the middle."""
    text = VARIANTS[variant](lines)
    data = text.encode()
    parser = Parser(Language(tree_sitter_javascript.language()))
    document = ScriptDocument(text)
    analyze_document(document, CAPABILITIES)
    preflighted(f"{text}// warm-up\n")
    rows = text.split("\n")
    line, column = keystroke(rows.index(UNCLOSED) if phase == "header" else len(rows) // 2, text)
    walk = detect_dialect(data, None).walk
    for repeat in range(repeats if phase != "none" else 0):
        if phase == "parse":
            parser.parse(data)
        elif phase == "document":
            ScriptDocument(text)
        elif phase == "facts":
            ScriptDocument(text).facts(walk)
        elif phase in ("incremental", "header"):  # type one character, then delete it (as `measure` does)
            end = column + (repeat % 2)
            document.apply_change(line, column, line, end, "" if repeat % 2 else "x")
            analyze_document(document, CAPABILITIES)
        elif phase == "preflight":
            preflighted(f"{text}// run {repeat}\n")
        else:
            analyze_document(ScriptDocument(text), CAPABILITIES)


def instructions(lines: int, repeats: int, variant: str) -> None:
    """One line of millions of instructions per operation, each phase in its own callgrind run."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("--instructions needs valgrind (apt-get install valgrind)")
    counts = {}
    phases = [phase for phase in PHASES if phase != "header" or variant == "unclosed"]
    for phase in phases:
        command = [valgrind, "--tool=callgrind", "--callgrind-out-file=/dev/null", sys.executable, __file__]
        command += ["--phase", phase, "--sizes", str(lines), "--runs", str(repeats), "--variant", variant]
        environment = {**os.environ, "PYTHONHASHSEED": "0"}
        output = subprocess.run(command, capture_output=True, text=True, env=environment, check=True).stderr
        found = re.search(r"Collected : (\d+)", output)
        if found is None:
            raise SystemExit(f"no instruction count from callgrind:\n{output}")
        counts[phase] = int(found.group(1))
    per = {phase: (counts[phase] - counts["none"]) / repeats / 1e6 for phase in phases}
    header = f" | header {per['header']:7.1f} M" if "header" in per else ""
    print(
        f"{lines:>5} lines {variant:>8}: parse {per['parse']:7.1f} M | document {per['document']:7.1f} M"
        f" | facts walk {per['facts'] - per['document']:7.1f} M | rules {per['full'] - per['facts']:7.1f} M"
        f" | full {per['full']:7.1f} M | full/parse {per['full'] / per['parse']:4.2f}x"
        f" | incremental {per['incremental']:7.1f} M{header} | preflight {per['preflight']:7.1f} M"
    )


def against(baseline: Path, sizes: list[int], runs: int, with_preflight: bool, variant: str) -> None:
    """Both trees measured in alternating rounds of separate processes (`--samples`), so both see
    the same load: one line per tree and size."""
    compileall.compile_dir(baseline, quiet=1)  # (a copied tree's bytecode is stale)
    trees = {"baseline": {**os.environ, "PYTHONPATH": str(baseline.resolve())}, "now": dict(os.environ)}
    rounds = max(1, runs // 3)
    for lines in sizes:
        found: dict[str, dict[str, list[float]]] = {tree: {} for tree in trees}
        for _ in range(rounds):
            for tree, environment in trees.items():
                command = [sys.executable, __file__, "--samples", "--sizes", str(lines), "--runs", str(runs // rounds)]
                command += ["--variant", variant]
                command += [] if with_preflight else ["--no-preflight"]
                output = subprocess.run(command, capture_output=True, text=True, env=environment, check=True).stdout
                for kind, values in json.loads(output).items():
                    found[tree].setdefault(kind, []).extend(values)
        for tree, results in found.items():
            report(tree, {kind: Timing.of(values) for kind, values in results.items()}, lines, variant == "valid")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--runs", type=int, default=25)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000], help="script sizes in lines")
    parser.add_argument("--no-preflight", action="store_true", help="skip the preflight timing (exact syntax check)")
    parser.add_argument(
        "--instructions", action="store_true", help="count instructions with callgrind (--runs: repeats, e.g. 3)"
    )
    parser.add_argument("--against", type=Path, metavar="DIR", help="a baseline tree to alternate with (its src/)")
    parser.add_argument(
        "--variant", choices=VARIANTS, default="valid", help="the script --instructions and --against measure"
    )
    parser.add_argument("--phase", choices=PHASES, help=argparse.SUPPRESS)
    parser.add_argument("--samples", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.phase is not None:
        run_phase(args.phase, args.sizes[0], args.runs, args.variant)
        return 0
    if args.samples:  # one round of `--against`: the variant's samples, as JSON
        print(json.dumps(sample(VARIANTS[args.variant](args.sizes[0]), args.runs, not args.no_preflight)))
        return 0
    if args.against is not None:
        against(args.against, args.sizes, args.runs, not args.no_preflight, args.variant)
        return 0
    if args.instructions:
        for lines in args.sizes:
            instructions(lines, args.runs, args.variant)
        return 0
    failed = False
    for lines in args.sizes:
        text = script(lines)
        assert text.count("\n") == lines, (lines, text.count("\n"))
        check_valid(text)
        failed = report("valid", measure(text, args.runs, not args.no_preflight), lines) or failed
        report("broken", measure(broken(text), args.runs, False), lines, bars=False)
        report("unclosed", measure(unclosed(text), args.runs, False), lines, bars=False)
        report("wrapped", measure(wrapped(text), args.runs, False), lines, bars=False)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
