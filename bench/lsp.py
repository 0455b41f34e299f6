"""Language server latency and memory (DESIGN section 11): a real `piflow serve` over stdio.

For generated realistic scripts of 100, 1,000 and 5,000 lines (the generator of `bench/analysis.py`),
measures the time from sending a one-character `didChange` to receiving the `publishDiagnostics`
of that version — median and p95 over `--edits` edits, each sent after the previous one was
answered — and the server's resident memory (VmRSS) once it sits idle with 20 open scripts.
With `--during-run`, the 1,000-line figures are taken again while a 5,000-agent scripted run,
launched from that server (`piflow.run`, so an owner process executes it), goes on: the server
follows it through the change feed and sends its progress deltas meanwhile. That mode also prints
the machine's load average (other processes skew every figure on a shared machine) and the CPU the
server spent from the launch to the run's end, typing included.

The clock is the client's, around a pipe: an upper bound of the server-side time (the pipe adds
tens of microseconds). Bars: median <= 10 ms at 1,000 lines; RSS <= 80 MB with 20 open scripts.

Usage: `.venv/bin/python bench/lsp.py [--edits 60] [--sizes 100,1000,5000] [--documents 20]`
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import queue
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
BARS = {"latency_1000_median_ms": 10.0, "rss_mb": 80.0}
DURING_RUN_BARS = {"median": 10.0, "p95": 25.0, "max": 100.0}
RUN_AGENTS = 5000
RUN_TIMEOUT = 300.0


def _generator() -> Any:
    """`script(lines)` of bench/analysis.py: the same realistic scripts the analysis bench uses."""
    spec = importlib.util.spec_from_file_location("bench_analysis", BENCH / "analysis.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.script


class Server:
    """A `piflow serve` child and a reader thread that timestamps every message it sends."""

    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "piflow", "serve", "--stdio"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env,
        )
        self.messages: queue.Queue[tuple[float, dict[str, Any]]] = queue.Queue()
        self._ids = 0
        self.finished: list[dict[str, Any]] = []
        """`piflow/runFinished` params seen while waiting for diagnostics."""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        stream = self.process.stdout
        assert stream is not None
        while True:
            length = 0
            while (line := stream.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            if not length:
                return
            body = stream.read(length)
            self.messages.put((time.perf_counter(), json.loads(body)))

    def send(self, message: dict[str, Any]) -> float:
        data = json.dumps({"jsonrpc": "2.0", **message}).encode()
        stream = self.process.stdin
        assert stream is not None
        stream.write(b"Content-Length: %d\r\n\r\n%s" % (len(data), data))
        stream.flush()
        return time.perf_counter()

    def request(self, method: str, params: Any) -> Any:
        self._ids += 1
        self.send({"id": self._ids, "method": method, "params": params})
        while True:
            _, message = self.messages.get(timeout=60)
            if message.get("id") == self._ids and "method" not in message:
                return message.get("result")
            if "method" in message and "id" in message:  # a request to the client: answer it
                self.send({"id": message["id"], "result": None})

    def published(self, uri: str, version: int) -> float:
        """Arrival time of the diagnostics of `version` of `uri` (the client declares versionSupport)."""
        while True:
            arrived, message = self.messages.get(timeout=60)
            if "id" in message and "method" in message:
                self.send({"id": message["id"], "result": None})
                continue
            params = message.get("params") or {}
            if message.get("method") == "piflow/runFinished":
                self.finished.append(params)
            ours = params.get("uri") == uri and params.get("version") == version
            if message.get("method") == "textDocument/publishDiagnostics" and ours:
                return arrived

    def drain(self, seconds: float) -> None:
        deadline = time.perf_counter() + seconds
        while (left := deadline - time.perf_counter()) > 0:
            try:
                _, message = self.messages.get(timeout=left)
            except queue.Empty:
                return
            if "id" in message and "method" in message:
                self.send({"id": message["id"], "result": None})

    def rss_mb(self) -> float:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
        return float("nan")

    def cpu_seconds(self) -> float:
        """User and system CPU time of the server, all its threads included."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def close(self) -> None:
        self.request("shutdown", None)
        self.send({"method": "exit"})
        self.process.wait(timeout=30)


def environment(root: Path) -> dict[str, str]:
    """An isolated home with workflow settings, a role and a model registry (as a user has)."""
    agent = root / "home" / ".pi" / "agent"
    (agent / "pi-extensible-workflows" / "roles").mkdir(parents=True, exist_ok=True)
    (agent / "pi-extensible-workflows" / "settings.json").write_text(
        json.dumps({"modelAliases": {"fast": "openai/gpt-5.1", "smart": "anthropic/claude-sonnet-4.5:high"}})
    )
    for role in ("reviewer", "scout"):
        role_file = agent / "pi-extensible-workflows" / "roles" / f"{role}.md"
        role_file.write_text(f"---\ndescription: {role}\n---\n{role}\n")
    providers = {
        "openai": {"baseUrl": "https://api.openai.com/v1", "api": "openai-completions", "apiKey": "sk-bench",
                   "models": [{"id": "gpt-5.1"}]},
        "anthropic": {"baseUrl": "https://api.anthropic.com/v1", "api": "openai-completions", "apiKey": "sk-bench",
                      "models": [{"id": "claude-sonnet-4.5"}]},
    }
    (agent / "models.json").write_text(json.dumps({"providers": providers}))
    (root / "project").mkdir(exist_ok=True)
    (root / "project" / "piflow.toml").write_text("[piflow]\n")
    return {
        **{key: value for key, value in os.environ.items() if key in ("PATH", "PYTHONPATH", "LANG")},
        "HOME": str(root / "home"),
        "XDG_CONFIG_HOME": str(root / "xdg" / "config"),
        "XDG_STATE_HOME": str(root / "xdg" / "state"),
        "PI_CODING_AGENT_DIR": str(agent),
    }


def start(root: Path, *, custom_notifications: bool = False) -> Server:
    server = Server(environment(root))
    capabilities = {
        "general": {"positionEncodings": ["utf-16"]},
        "textDocument": {"publishDiagnostics": {"versionSupport": True}, "synchronization": {"didSave": True}},
        "window": {"workDoneProgress": False},
    }
    project = (root / "project").as_uri()
    options = {"piflow": {"customNotifications": custom_notifications}}
    server.request("initialize", {"processId": os.getpid(), "rootUri": project, "capabilities": capabilities,
                                  "initializationOptions": options})
    server.send({"method": "initialized", "params": {}})
    return server


def open_script(server: Server, uri: str, text: str) -> float:
    """Open a script; the time until its first diagnostics (a full check) in milliseconds."""
    sent = server.send({"method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": uri, "languageId": "javascript", "version": 1, "text": text}}})
    return (server.published(uri, 1) - sent) * 1000


def typing_latency(server: Server, uri: str, text: str, edits: int) -> list[float]:
    """One-character edits in the middle of the script (insert, then delete), one at a time."""
    lines = text.split("\n")
    line = len(lines) // 2
    column = max(lines[line].find('"') + 1, 0)
    samples = []
    for version in range(2, edits + 2):
        insert = version % 2 == 0
        change = {
            "range": {"start": {"line": line, "character": column},
                      "end": {"line": line, "character": column if insert else column + 1}},
            "text": "x" if insert else "",
        }
        sent = server.send({"method": "textDocument/didChange", "params": {
            "textDocument": {"uri": uri, "version": version}, "contentChanges": [change]}})
        samples.append((server.published(uri, version) - sent) * 1000)
    return samples


def fan_out(agents: int) -> str:
    tasks = ",\n".join(f"  t{i}: () => agent('task {i}')" for i in range(agents))
    return f'const results = await parallel("fan", {{\n{tasks}\n}});\nreturn Object.keys(results).length;\n'


def during_run(root: Path, text: str, edits: int, agents: int = RUN_AGENTS) -> bool:
    """Typing at 1,000 lines while a 5,000-agent run launched from the same server executes."""
    server = start(root, custom_notifications=True)
    try:
        uri = (root / "project" / "typing.workflow.js").as_uri()
        open_script(server, uri, text)
        server.drain(2.0)
        idle = typing_latency(server, uri, text, edits)
        run_path = root / "project" / "fan.workflow.js"
        run_text = fan_out(agents)
        run_path.write_text(run_text)
        open_script(server, run_path.as_uri(), run_text)
        server.drain(3.0)
        launched = server.request("workspace/executeCommand", {
            "command": "piflow.run", "arguments": [{"uri": run_path.as_uri(), "backend": "scripted"}]})
        assert launched and "runId" in launched, launched
        began, cpu = time.perf_counter(), server.cpu_seconds()
        busy: list[float] = []
        while not server.finished and time.perf_counter() - began < RUN_TIMEOUT:  # edits until the run ends
            busy += typing_latency(server, uri, text, 2)
        ended = server.finished[0]["state"] if server.finished else f"still running after {RUN_TIMEOUT:.0f} s"
        elapsed, cpu = time.perf_counter() - began, server.cpu_seconds() - cpu
        print(f"typing at 1,000 lines while a {agents}-agent run launched from this server executes "
              f"({len(busy)} edits in {elapsed:.1f} s, from the launch to the run's end: {ended}; "
              f"server CPU {cpu:.2f} s; load average {' '.join(Path('/proc/loadavg').read_text().split()[:3])}):")
        failed = False
        for name, idle_value, busy_value in (
            ("median", statistics.median(idle), statistics.median(busy)),
            ("p95", p95(idle), p95(busy)),
            ("max", max(idle), max(busy)),
        ):
            over = busy_value > DURING_RUN_BARS[name]
            failed = failed or over
            print(f"  {name:>6}: idle {idle_value:6.2f} ms  during the run {busy_value:6.2f} ms  "
                  f"(bar {DURING_RUN_BARS[name]:.0f} ms: {'OVER' if over else 'ok'})")
        return failed
    finally:
        server.close()


def p95(samples: list[float]) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--edits", type=int, default=60)
    parser.add_argument("--sizes", default="100,1000,5000")
    parser.add_argument("--documents", type=int, default=20)
    parser.add_argument("--document-lines", default="100,300", help="sizes of the scripts for the RSS figures")
    parser.add_argument("--during-run", action="store_true",
                        help="only: typing at 1,000 lines while a scripted run executes")
    parser.add_argument("--run-agents", type=int, default=RUN_AGENTS, help="agents of that run")
    args = parser.parse_args()
    script = _generator()
    failed = False
    with tempfile.TemporaryDirectory(prefix="piflow-bench-") as temp:
        root = Path(temp)
        if args.during_run:
            return 1 if during_run(root, script(1000), args.edits, args.run_agents) else 0
        server = start(root)
        try:
            print("didChange -> publishDiagnostics, 1-character edit (client clock, over stdio):")
            for lines in (int(size) for size in args.sizes.split(",")):
                text = script(lines)
                uri = (root / "project" / f"bench-{lines}.workflow.js").as_uri()
                opened = open_script(server, uri, text)
                server.drain(1.0 + lines / 2000)  # let the engine compile of the open finish
                samples = typing_latency(server, uri, text, args.edits)
                median = statistics.median(samples)
                verdict = ""
                if lines == 1000:
                    over = median > BARS["latency_1000_median_ms"]
                    failed = failed or over
                    verdict = f"  (bar {BARS['latency_1000_median_ms']:.0f} ms: {'OVER' if over else 'ok'})"
                print(f"  {lines:>5} lines: median {median:6.2f} ms  p95 {p95(samples):6.2f} ms  "
                      f"(n={len(samples)}; open -> first diagnostics {opened:.0f} ms){verdict}")
                server.send({"method": "textDocument/didClose", "params": {"textDocument": {"uri": uri}}})
        finally:
            server.close()
        for lines in (int(size) for size in args.document_lines.split(",")):
            server = start(root)
            try:
                text = script(lines)
                for number in range(args.documents):
                    open_script(server, (root / "project" / f"open-{lines}-{number}.workflow.js").as_uri(), text)
                server.drain(3.0)  # the compiles of the opens end, then the server trims its heap
                rss = server.rss_mb()
                over = rss > BARS["rss_mb"]
                failed = failed or over
                print(f"RSS idle with {args.documents} open scripts of {lines} lines: {rss:.1f} MB  "
                      f"(bar {BARS['rss_mb']:.0f} MB: {'OVER' if over else 'ok'})")
            finally:
                server.close()
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
