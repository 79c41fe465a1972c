"""pair.json: the record of a lockstep pair — two canaries (base and head code trees) that took turns.

Each side's own measurements are in its metrics.json (with `pair` naming this record's pair_id, and the
series column pair/round); this record keeps what belongs to the pair: the turns in the order they were
given, the chunk size, and how each side ended.
"""

from __future__ import annotations

from typing import Final, Literal

from pydantic import Field

from canary_action.metrics.schema import Closed

PAIR_RECORD_VERSION: Final = 1
Side = Literal["base", "head"]


class Round(Closed):
    index: int
    order: list[Side] = Field(description="The sides in the order they trained this round (drawn at random).")


class SideEnd(Closed):
    tree: str
    config_path: str = Field(description="The config file inside the tree.")
    metrics_path: str = Field(description="The side's metrics.json, relative to pair.json's directory.")
    exit_code: int | None = Field(description="0 trained, 2 refused config, 3 crashed; None: never started.")
    steps: int = Field(description="Optimizer steps the side completed.")


class PairRecord(Closed):
    pair_record_version: Literal[1] = PAIR_RECORD_VERSION
    pair_id: str
    chunk_steps: int
    seed: int = Field(description="Seed of the random orders: which side starts first, and inside each round.")
    started_at: str
    finished_at: str
    wall_s: float = Field(description="Both sides, from start to the last metrics.json written.")
    rounds: list[Round]
    base: SideEnd
    head: SideEnd
