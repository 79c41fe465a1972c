"""Talking to the Actions runner: workflow commands on stdout, step outputs, the job summary.

Workflow commands (`::error title=…::message`) are lines the runner interprets, so what goes into them is
escaped as the runner unescapes it (`%`, CR, LF; in properties also `:` and `,`). Text that may come from an
untrusted artifact is printed between `::stop-commands::` markers with a random token, so a line in it that
looks like a command (`::add-mask::`, `::error::`) stays text. Outputs use the multi-line `name<<DELIMITER`
form with a random delimiter, which no value can end early.
"""

from __future__ import annotations

import contextlib
import secrets
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TextIO

Level = Literal["error", "warning", "notice"]


def escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


@dataclass
class Log:
    """The step log. Every line the action prints goes through here."""

    out: TextIO = field(default_factory=lambda: sys.stdout)

    def line(self, text: str = "") -> None:
        """A line we wrote ourselves (no untrusted text in it)."""
        self.out.write(text + "\n")
        self.out.flush()

    def untrusted(self, text: str) -> None:
        """Text from outside (an artifact, a GitHub answer): printed with workflow commands switched off."""
        token = secrets.token_hex(16)
        self.line(f"::stop-commands::{token}")
        self.line(text)
        self.line(f"::{token}::")

    @contextlib.contextmanager
    def commands_off(self) -> Iterator[None]:
        """Workflow commands switched off for the block: a pull request's training output (its own stdout and
        stderr, both of which the runner reads) cannot mask text, add annotations or switch commands off itself.
        The resume token is random and never leaves this process."""
        token = secrets.token_hex(16)
        self.line(f"::stop-commands::{token}")
        try:
            yield
        finally:
            sys.stderr.flush()
            self.line(f"::{token}::")

    def annotate(self, level: Level, message: str, *, title: str | None = None, file: str | None = None) -> None:
        props = [f"{k}={escape_property(v)}" for k, v in (("title", title), ("file", file)) if v]
        self.line(f"::{level}{' ' + ','.join(props) if props else ''}::{escape_data(message)}")

    def mask(self, secret: str) -> None:
        """From here on the runner replaces `secret` with *** in the log."""
        for part in secret.splitlines():  # the runner masks line by line
            if part.strip():
                self.line(f"::add-mask::{escape_data(part)}")


def write_outputs(path: Path | None, values: Mapping[str, str]) -> None:
    """Append step outputs to GITHUB_OUTPUT (no file: not in a runner, nothing to do)."""
    if path is None:
        return
    with path.open("a", encoding="utf-8") as f:
        for name, value in values.items():
            delimiter = f"ghadelimiter_{secrets.token_hex(16)}"
            f.write(f"{name}<<{delimiter}\n{value}\n{delimiter}\n")


def append_summary(path: Path | None, markdown: str) -> None:
    """Append to the job summary (GITHUB_STEP_SUMMARY); several steps and configs share one page."""
    if path is None:
        return
    with path.open("a", encoding="utf-8") as f:
        f.write(markdown if markdown.endswith("\n") else markdown + "\n")
