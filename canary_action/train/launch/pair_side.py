"""One side of a lockstep pair: `python -m canary_action.train.launch.pair_side --spec F --turns R W`.

The coordinator (pair.py) starts this with the side's code tree on the import path (after the installed packages)
and as the working directory. It runs the same CanaryRun as a single process, with a TurnGate between steps: at the
start and after every chunk_steps optimizer steps it says where it is and blocks until the coordinator gives it the
next turn ("go <round>") or ends the pair ("stop"). Whatever ends it, it writes its own metrics.json.

The line protocol, over two pipes the coordinator opened (stdout stays the training log's):

    side -> coordinator   "wait 0 <cpu|cuda>"             at step 0: loaded, and on which device it trains
    side -> coordinator   "wait <steps completed>"      at each chunk boundary but the last
    coordinator -> side   "go <round>" | "stop"
    end of the side's pipe                              the side has ended (finished, stopped, crashed)

Exit status: 0 trained (completed or stopped early), 2 refused config, 3 crashed.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import traceback
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from types import FrameType
from typing import IO

from pydantic import BaseModel, ConfigDict

from canary_action.config.load import parse_config
from canary_action.errors import ConfigError
from canary_action.metrics import schema as m

PAIR_ENDED = "pair_ended"
#: The side's traceback when it failed, in its run directory (CanaryRun.fail writes it; so does a failed start).
ERROR_LOG = "error.log"


class SideSpec(BaseModel):
    """What the coordinator hands a side: its resolved config, where to write, and who it is."""

    model_config = ConfigDict(extra="forbid")

    run_id: str
    run_dir: Path
    started: datetime
    config: dict[str, object]
    config_source: str
    notices: list[str]
    side: m.PairSide


class TurnGate:
    """The StepGate of a lockstep side: waits for its turn at step 0 and every chunk_steps steps."""

    def __init__(self, incoming: IO[str], outgoing: IO[str], chunk_steps: int, max_steps: int) -> None:
        self.incoming, self.outgoing = incoming, outgoing
        self.chunk_steps, self.max_steps = chunk_steps, max_steps
        self.round = -1
        self.device: Callable[[], str] = lambda: "cpu"
        """The device the side trains on, said with its first wait (the run knows it once it has loaded)."""

    def wait(self, completed_steps: int) -> str | None:
        if completed_steps >= self.max_steps or completed_steps % self.chunk_steps:
            return None  # inside a chunk, or the last step: nothing to wait for
        try:
            device = f" {self.device()}" if completed_steps == 0 else ""
            self.outgoing.write(f"wait {completed_steps}{device}\n")
            self.outgoing.flush()
        except BrokenPipeError:
            return PAIR_ENDED  # the coordinator is gone
        words = self.incoming.readline().split()
        if len(words) == 2 and words[0] == "go":
            self.round = int(words[1])
            return None
        return PAIR_ENDED  # "stop", or the coordinator closed the pipe

    def columns(self) -> dict[str, float]:
        return {m.PAIR_ROUND: float(self.round)}


class Terminated(Exception):  # noqa: N818  # a signal turned into something the run records
    """The coordinator ended this side (a timeout, or the pair was interrupted)."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m canary_action.train.launch.pair_side")
    parser.add_argument("--spec", type=Path, required=True, help="The side's spec written by the coordinator.")
    parser.add_argument("--turns", type=int, nargs=2, required=True, metavar=("READ_FD", "WRITE_FD"))
    args = parser.parse_args(argv)
    spec = SideSpec.model_validate_json(args.spec.read_text(encoding="utf-8"))
    # A SIGTERM during the imports below is held until the run exists, so that it is recorded and written.
    early: list[int] = []
    signal.signal(signal.SIGTERM, lambda signum, _: early.append(signum))
    try:
        from canary_action.train.run import CanaryRun, quiet_libraries
        from canary_action.train.stages import reset_stage

        loaded = parse_config(spec.config, source=spec.config_source)
    except Exception as error:  # before the run exists to record it: where the coordinator's message points
        (spec.run_dir / ERROR_LOG).write_text("".join(traceback.format_exception(error)), encoding="utf-8")
        raise
    loaded.notices.extend(spec.notices)
    with os.fdopen(args.turns[0], "r") as incoming, os.fdopen(args.turns[1], "w") as outgoing:
        gate = TurnGate(incoming, outgoing, spec.side.chunk_steps, loaded.config.max_steps)
        # Both sides log to the same stderr: each line says whose it is.
        run = CanaryRun(loaded, spec.run_dir, gate=gate, label=f"{loaded.config.name} {spec.side.side}")
        gate.device = lambda: run.placement.device.type if run.placement is not None else "cpu"
        reset_stage()
        quiet_libraries()
        run.provisional(spec.run_id, spec.started, pair=spec.side)  # what a SIGKILL leaves
        code = 0
        signal.signal(signal.SIGTERM, _terminated)
        try:
            if early:
                _terminated(early[0], None)
            run.execute()
        except BaseException as error:  # recorded, then the exit status tells the coordinator how it ended
            run.fail(error)
            code = 2 if isinstance(error, ConfigError) else 3
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # a late SIGTERM must not cut the file short
        run.finish(spec.run_id, spec.started, pair=spec.side)
        # Only now does the coordinator learn that this side ended and hand the turn on: a side that wrote its
        # results while the other trained its last chunk slowed those steps 1.8-2.5x (48 of 48 benchmark pairs).
        # A coordinator that is gone left a "wait" line unsent in the buffer: closing would raise for it.
        with contextlib.suppress(BrokenPipeError):
            outgoing.close()
    return code


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(f"ended by the lockstep coordinator (signal {signum})")


if __name__ == "__main__":
    sys.exit(main())
