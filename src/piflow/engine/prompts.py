"""The text an agent attempt receives (spec J.3, J.4)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from piflow.errors import WorkflowError

SUBMIT_RESULT = "Submit the final result now by calling workflow_result exactly once. Do not return prose."
REPAIR_RESULT = (
    "Your result was missing or invalid. Repair it by calling workflow_result exactly once with a "
    "schema-valid value."
)
NO_VALID_RESULT = "Agent did not submit a valid workflow_result after one repair"
NOT_ACCEPTING = "Result acceptance is not enabled yet."
RESULT_REJECTED = "Result does not match the required schema."
RESULT_ACCEPTED = "Result accepted."


async def submit_result(prompt: Callable[[str], Awaitable[None]], accepted: Callable[[], bool]) -> None:
    """After the main turn: ask for `workflow_result`, repair once, else RESULT_INVALID (spec J.4).

    The caller enables acceptance before calling and reads the accepted value afterwards.
    """
    for text in (SUBMIT_RESULT, REPAIR_RESULT):
        await prompt(text)
        if accepted():
            return
    raise WorkflowError("RESULT_INVALID", NO_VALID_RESULT)


def attempt_prompt(
    workflow_name: str,
    label: str,
    task: str,
    *,
    parent_id: str | None = None,
    retry_of: tuple[int, str] | None = None,
    soft_instruction: str | None = None,
) -> str:
    """The task prompt of one attempt; `retry_of` is (attempt number, previous error message)."""
    lines = [f"Workflow: {workflow_name}", f"Agent: {label}"]
    if parent_id is not None:
        lines.append(f"Parent: {parent_id}")
    lines.append(
        "You own this task and any direct child agents you create. Return child results to your parent; "
        "do not leave descendants running."
    )
    if retry_of is not None:
        lines.append(f"Retry attempt {retry_of[0]}. Previous state: {retry_of[1]}")
    body = task if soft_instruction is None else f"{task}\n\n{soft_instruction}"
    return "\n".join(lines) + "\n\nTask:\n" + body
