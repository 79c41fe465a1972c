"""The entry module each rank runs under accelerate's launcher:
`python -m canary_action.train.launch.rank_worker --spec F`.

The spec (written by ranks.py) holds the resolved config and the run directory the parent chose, so every
rank trains the same canary into the same run. A rank runs the same `CanaryRun` as a single process, then leaves
its RankRecord; it never writes metrics.json (ranks.py, in the launching process, merges them). Its exit status is
0 when it trained, 1 when it failed: the launcher then ends the other ranks.
"""

from __future__ import annotations

import argparse
import signal
import sys
from pathlib import Path
from types import FrameType

from pydantic import BaseModel, ConfigDict

from canary_action.config.load import parse_config


class LaunchSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    run_dir: Path
    config: dict[str, object]


class Terminated(Exception):  # noqa: N818  # the launcher's SIGTERM, turned into something a rank can record
    """The launcher ended this rank, usually because another one failed."""


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m canary_action.train.launch.rank_worker")
    parser.add_argument("--spec", type=Path, required=True, help="The launch spec written by `canary run`.")
    spec_path = parser.parse_args(argv).spec
    spec = LaunchSpec.model_validate_json(spec_path.read_text(encoding="utf-8"))
    signal.signal(signal.SIGTERM, _terminated)

    from canary_action.train.ranks import RankContext, write_record
    from canary_action.train.run import CanaryRun, quiet_libraries
    from canary_action.train.stages import reset_stage

    context = RankContext.from_environment(spec.run_dir)
    run = CanaryRun(parse_config(spec.config, source=str(spec_path)), spec.run_dir, rank=context)
    reset_stage()
    quiet_libraries()
    code = 0
    try:
        run.execute()
    except BaseException as error:  # a rank records whatever ended it; the launcher sees the exit status
        run.fail(error)
        code = 1
    write_record(context, run.rank_record())
    return code


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise Terminated(f"ended by the launcher (signal {signum}): another rank failed, or the run was interrupted")


if __name__ == "__main__":
    sys.exit(main())
