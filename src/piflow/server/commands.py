"""`workspace/executeCommand`: the `piflow.*` commands that lenses, plugins and users invoke.

Each command takes one JSON object (validated by its model in `protocol`) and answers with its
result model; a workflow error becomes an LSP error (`RequestFailed`, the code and message in
`data`). A run launches the text the editor has, after the authoritative checks (the engine
compile included): a script with errors is refused with its first error, like `piflow run`.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Final

from lsprotocol import types
from pydantic import ValidationError
from pygls.exceptions import JsonRpcInvalidParams

from piflow.analysis.analyze import analyze
from piflow.analysis.script_file import read_script_file, unreadable_script
from piflow.config.files import FileRefused
from piflow.errors import WorkflowError
from piflow.server import protocol
from piflow.server.base import LanguageFeature, command_error
from piflow.server.documents import SCRIPT_SUFFIX, DocumentTable
from piflow.server.projects import Projects
from piflow.server.runs import Host, Runs, canonical_path

_RECENT_ARGS: Final = 4
_TITLE_WIDTH: Final = 60

Implementation = Callable[[Any], Awaitable[dict[str, Any]]]


def _first_error(findings: Any) -> WorkflowError | None:
    for finding in findings:
        if finding.severity == "error":
            return WorkflowError(finding.code, finding.message)
    return None


def args_file(path: str) -> Path:
    """`review.workflow.js` → `review.args.json` beside it: the args a plugin-less Run with args offers."""
    name = Path(path).name
    stem = name[: -len(SCRIPT_SUFFIX)] if name.endswith(SCRIPT_SUFFIX) else Path(path).stem
    return Path(path).with_name(f"{stem}.args.json")


def _recent_args(host: Host, path: str) -> list[Any]:
    """Worker thread: the distinct args of the script's recent runs, newest first."""
    store = host.open_reader()
    found: list[Any] = []
    if store is None:
        return found
    for record in store.list_runs(script_path=path)[:20]:
        args = store.snapshot(record.id).get("args")
        if args not in found:
            found.append(args)
    return found[:_RECENT_ARGS]


class Commands(LanguageFeature):
    def register(self) -> None:
        implementations: dict[str, Implementation] = {
            "piflow.run": self._run,
            "piflow.runWithArgs": self._run_with_args,
            "piflow.showErrors": self._show_errors,
            "piflow.resume": lambda a: self._runs.resume(a.run_id, a.budget),
            "piflow.pause": lambda a: self._runs.pause(a.run_id),
            "piflow.stop": lambda a: self._runs.stop(a.run_id),
            "piflow.respond": lambda a: self._runs.respond(
                a.run_id, name=a.name, proposal_id=a.proposal_id, approved=a.approved
            ),
            "piflow.listRuns": self._list_runs,
            "piflow.showRun": self._show_run,
            "piflow.showAgent": self._show_agent,
        }
        for command in protocol.COMMANDS:
            self.server.command(command.name)(self._handler(command, implementations[command.name]))

    @staticmethod
    def _handler(command: protocol.Command, implementation: Implementation) -> Callable[..., Awaitable[Any]]:
        async def execute(*arguments: Any) -> Any:
            # No argument, or Lua's empty table (which encodes as `[]`), means `{}`.
            argument = arguments[0] if arguments else {}
            if argument == []:
                argument = {}
            if len(arguments) > 1 or not isinstance(argument, dict):
                raise JsonRpcInvalidParams(f"{command.name} takes one JSON object argument")
            try:
                parsed = command.arguments.model_validate(argument)
            except ValidationError as error:
                raise JsonRpcInvalidParams(f"{command.name}: {error.errors()[0]['msg']}") from None
            try:
                result = await implementation(parsed)
            except WorkflowError as error:
                raise command_error(error) from None
            return command.result.model_validate(result).to_wire()

        execute.__name__ = command.name
        return execute

    @property
    def _runs(self) -> Runs:
        return self.server.get_feature(Runs)

    # -- launching ----------------------------------------------------------------------------
    async def _checked_script(self, uri: str) -> tuple[str, str]:
        """`(path, text)` of a script that passes every check, the engine compile included."""
        path = canonical_path(uri)
        if path is None:
            raise WorkflowError("INVALID_SYNTAX", f"Only files can run: {uri}")
        snapshot = await self.server.get_feature(DocumentTable).current(uri, compiled=True)
        if snapshot is not None:
            text, findings = snapshot.text, list(snapshot.findings)
        else:
            try:
                script = await self.server.run_in_thread(read_script_file, path)
            except (OSError, FileRefused) as error:
                raise WorkflowError("INVALID_SYNTAX", unreadable_script(path, error)) from None
            text = script.launch_text()
            project = await self.server.get_feature(Projects).for_path(path)
            findings = await self.server.run_in_thread(analyze, text, project.capabilities, None, True)
        first = _first_error(findings)
        if first is not None:
            raise first
        return path, text

    async def _run(self, arguments: protocol.RunArguments) -> dict[str, Any]:
        path, text = await self._checked_script(arguments.uri)
        options = arguments.model_dump(exclude={"uri"}, exclude_unset=True)
        return {"runId": await self._runs.launch(path, text, **options)}

    async def _run_with_args(self, arguments: protocol.UriArguments) -> dict[str, Any]:
        path, _ = await self._checked_script(arguments.uri)
        self.server.spawn(self._ask_args(arguments.uri, path))
        return {"asked": True}

    async def _ask_args(self, uri: str, path: str) -> None:
        """Offer the args file and recent args; launch with the one chosen (a background task)."""
        choices: dict[str, Any] = {}
        file = args_file(path)
        if file.exists():
            try:
                value = json.loads(file.read_text(encoding="utf-8"))
            except (OSError, ValueError) as error:
                self.server.window_show_message(
                    types.ShowMessageParams(types.MessageType.Warning, f"{file.name} is not valid JSON: {error}")
                )
            else:
                choices[f"{file.name}: {_preview(value)}"] = value
        host = await self._runs.host_for_path(path)
        for value in [*await self.server.run_in_thread(_recent_args, host, path), None]:
            choices.setdefault(f"args: {_preview(value)}", value)
        answer = await self.server.window_show_message_request_async(
            types.ShowMessageRequestParams(
                type=types.MessageType.Info,
                message=f"Run {Path(path).name} with which args? (Put your own in {file.name} beside it.)",
                actions=[types.MessageActionItem(title) for title in choices],
            )
        )
        if answer is None or answer.title not in choices:
            return
        try:
            _, text = await self._checked_script(uri)
            await self._runs.launch(path, text, args=choices[answer.title])
        except WorkflowError as error:
            self.server.window_show_message(
                types.ShowMessageParams(types.MessageType.Error, f"{error.code}: {error.message}")
            )

    async def _show_errors(self, arguments: protocol.UriArguments) -> dict[str, Any]:
        snapshot = await self.server.get_feature(DocumentTable).current(arguments.uri)
        findings = [finding for finding in snapshot.findings if finding.severity == "error"] if snapshot else []
        errors = [{"code": f.code, "message": f.message, "line": f.range.start.line} for f in findings]
        if errors:
            lines = [f"line {f.range.start.line + 1}: {f.code}: {f.message}" for f in findings[:5]]
            more = f"\n…and {len(errors) - 5} more" if len(errors) > 5 else ""
            self.server.window_show_message(
                types.ShowMessageParams(
                    types.MessageType.Warning, "Fix these errors before running:\n" + "\n".join(lines) + more
                )
            )
        return {"errors": errors}

    # -- reading ------------------------------------------------------------------------------
    async def _list_runs(self, arguments: protocol.ListRunsArguments) -> dict[str, Any]:
        path = canonical_path(arguments.uri) if arguments.uri else None
        if path is not None:
            await self._runs.host_for_path(path)
        return {"runs": await self._runs.summaries(path)}

    async def _show_run(self, arguments: protocol.RunIdArguments) -> dict[str, Any]:
        host, run_id = await self._runs.host_of_run(arguments.run_id)
        return await self._runs.view(host, run_id, details=True)

    async def _show_agent(self, arguments: protocol.AgentIdArguments) -> dict[str, Any]:
        host, run_id = await self._runs.host_of_run(arguments.run_id)
        return await self._runs.agent(host, run_id, arguments.agent_id)


def _preview(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    return text if len(text) <= _TITLE_WIDTH else text[: _TITLE_WIDTH - 1] + "…"
