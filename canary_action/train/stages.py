"""Which stage of a run is executing, so a crash is reported as "failed while loading the model", not just
as an exception. Nested stages restore the outer one on exit; a crash leaves the failing stage current.

A run may also ask to hear of each stage as it starts (`announce_stages`): the 30-50 s before the first step
(imports, the model, the data, the trainer) then show in the log as one line each, instead of silence.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

import psutil

_current: ContextVar[str] = ContextVar("canary_stage", default="config")
_announce: ContextVar[Callable[[str], None] | None] = ContextVar("canary_stage_announce", default=None)
#: (stage, entered, perf_counter) as stages enter and leave, while a run records them (`StageLog`).
_log: ContextVar[list[tuple[str, bool, float]] | None] = ContextVar("canary_stage_log", default=None)
#: The parts of the time before step 1, as metrics.json's `startup` names them.
STARTUP_PARTS: Final = ("process", "preflight", "build", "load_model", "load_data", "trainer_setup")


def current_stage() -> str:
    return _current.get()


@contextmanager
def stage(name: str) -> Iterator[None]:
    announce = _announce.get()
    if announce is not None and name != _current.get():
        announce(name)
    log = _log.get()
    if log is not None:
        log.append((name, True, time.perf_counter()))
    token = _current.set(name)
    yield  # no finally: on an exception the failing stage must stay visible to the runner
    _current.reset(token)
    if log is not None:
        log.append((name, False, time.perf_counter()))


@contextmanager
def announce_stages(announce: Callable[[str], None]) -> Iterator[None]:
    """Call `announce(name)` as each stage starts, inside this block (a stage re-entered inside itself, such
    as the tokenizer loaded within the model's stage, is not announced again)."""
    token = _announce.set(announce)
    try:
        yield
    finally:
        _announce.reset(token)


def reset_stage() -> None:
    _current.set("config")


class StageLog:
    """Where a run's time before step 1 went: `with StageLog() as log:` around the run records every stage's entry
    and exit; `startup(first_step_at)` splits the time from the process's start to step 1 into STARTUP_PARTS."""

    def __init__(self) -> None:
        self.events: list[tuple[str, bool, float]] = []
        self._token: object = None

    def __enter__(self) -> StageLog:
        self._token = _log.set(self.events)
        return self

    def __exit__(self, *_: object) -> None:
        _log.reset(self._token)  # type: ignore[arg-type]

    def startup(self, first_step_at: float | None) -> dict[str, float]:
        """Seconds per part: `process` (the interpreter, the imports, the config: from the process's start to the
        first stage), each stage's own time (nested stages apart: the model and the data load inside the build),
        `trainer_setup` (from the train stage's start to step 1: the trainer's own preparation), and `to_step_1`.
        Empty when the run never reached step 1."""
        if first_step_at is None or not self.events:
            return {}
        started = process_started()
        own: dict[str, float] = {"process": self.events[0][2] - started}
        stack: list[tuple[str, float]] = []
        for name, entered, at in self.events:
            if stack:  # the enclosing stage's own time runs until a nested one starts or it ends
                outer, since = stack[-1]
                own[outer] = own.get(outer, 0.0) + at - since
            if entered:
                stack.append((name, at))
            else:
                stack.pop()
            if stack:
                stack[-1] = (stack[-1][0], at)
            if name == "train" and entered:
                break
        train_at = next((at for name, entered, at in self.events if name == "train" and entered), None)
        if train_at is not None:
            own["trainer_setup"] = first_step_at - train_at
        own.pop("train", None)
        own["to_step_1"] = first_step_at - started
        return {part: round(seconds, 3) for part, seconds in own.items()}


def process_started() -> float:
    """When this process started, on the perf_counter clock."""
    return psutil.Process().create_time() - (time.time() - time.perf_counter())
