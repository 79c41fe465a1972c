"""Which stage of a run is executing, so a crash is reported as "failed while loading the model", not just
as an exception. Nested stages restore the outer one on exit; a crash leaves the failing stage current.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_current: ContextVar[str] = ContextVar("canary_stage", default="config")


def current_stage() -> str:
    return _current.get()


@contextmanager
def stage(name: str) -> Iterator[None]:
    token = _current.set(name)
    yield  # no finally: on an exception the failing stage must stay visible to the runner
    _current.reset(token)


def reset_stage() -> None:
    _current.set("config")
