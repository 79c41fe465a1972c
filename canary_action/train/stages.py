"""Which stage of a run is executing, so a crash is reported as "failed while loading the model", not just
as an exception. Nested stages restore the outer one on exit; a crash leaves the failing stage current.

A run may also ask to hear of each stage as it starts (`announce_stages`): the 30-50 s before the first step
(imports, the model, the data, the trainer) then show in the log as one line each, instead of silence.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_current: ContextVar[str] = ContextVar("canary_stage", default="config")
_announce: ContextVar[Callable[[str], None] | None] = ContextVar("canary_stage_announce", default=None)


def current_stage() -> str:
    return _current.get()


@contextmanager
def stage(name: str) -> Iterator[None]:
    announce = _announce.get()
    if announce is not None and name != _current.get():
        announce(name)
    token = _current.set(name)
    yield  # no finally: on an exception the failing stage must stay visible to the runner
    _current.reset(token)


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
