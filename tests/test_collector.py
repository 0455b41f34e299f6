"""`preflight`, `analyze` of a text and a command's imports hold the cyclic garbage collector off while
they run, and always give it back."""

from __future__ import annotations

import gc
import threading

import pytest

from piflow import Capabilities, WorkflowError, preflight
from piflow.analysis import analyze
from piflow.collector import collector_paused

CAPS = Capabilities.create(models=["openai/gpt"], tools=["read"])


def test_preflight_turns_the_collector_back_on_after_success_and_failure() -> None:
    assert gc.isenabled()
    preflight('await agent("a", { model: "openai/gpt" });', CAPS)
    assert gc.isenabled()
    with pytest.raises(WorkflowError):
        preflight('await agent("a", { model: "openai/nope" });', CAPS)
    assert gc.isenabled()


def test_analyzing_a_text_turns_the_collector_back_on() -> None:
    findings = analyze('await agent("a", { model: "openai/nope" });', CAPS)
    assert [finding.code for finding in findings] == ["UNKNOWN_MODEL"]
    assert gc.isenabled()


def test_a_collector_switched_off_by_the_program_stays_off() -> None:
    gc.disable()
    try:
        preflight('await agent("a", { model: "openai/gpt" });', CAPS)
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_overlapping_pauses_in_threads_resume_the_collector_once_the_last_ends() -> None:
    first_in, second_in, first_out = threading.Event(), threading.Event(), threading.Event()

    def first() -> None:
        with collector_paused():
            first_in.set()
            second_in.wait(10)
        first_out.set()

    thread = threading.Thread(target=first)
    thread.start()
    first_in.wait(10)
    with collector_paused():
        second_in.set()
        first_out.wait(10)
        assert not gc.isenabled()  # the first pause ended, this one has not
    thread.join(10)
    assert gc.isenabled()
