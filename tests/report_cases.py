"""Compare results for the report tests: one per verdict (deterministic, for the golden files), and hostile
ones whose every free-text field holds markdown, HTML, mentions, links and control characters.

Regenerate the hostile fixture (from the repository root) after a change to the result schema or to this file:

    .venv/bin/python -m tests.report_cases
"""

from __future__ import annotations

import itertools
import random
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

from canary_action.compare.command import run_compare
from canary_action.compare.result import Change, CompareResult, OpChange
from canary_action.compare.verdict import compare
from canary_action.config.thresholds import TIERS
from canary_action.metrics import schema
from canary_action.metrics.pair import CodeChange, CodeDiff
from canary_action.metrics.schema import Distributed, RankSummary, Status
from canary_action.report.view import Links
from tests.unit.test_compare import history, run
from tests.unit.test_correctness_compare import evaluation, pair
from tests.unit.test_distributed_compare import dist_history, dist_run

STEPS: Final = 30
SOURCES: Final = ["tier default", "file .github/canary-thresholds.yaml"]
LINKS: Final = Links(
    workflow_run="https://github.com/acme/trainer/actions/runs/4242",
    artifacts="https://github.com/acme/trainer/actions/runs/4242#artifacts",
    baseline_run="https://github.com/acme/trainer/actions/runs/4200",
    artifact_name="rlhf-canary-sft-smoke",
)
OUR_URLS: Final = frozenset(u for u in (LINKS.workflow_run, LINKS.artifacts, LINKS.baseline_run) if u)
HOSTILE_FIXTURE: Final = Path(__file__).parent / "fixtures" / "reports" / "hostile_result.json"


def passing() -> CompareResult:
    return compare(run(1, num_steps=STEPS), history(3, num_steps=STEPS), TIERS["default"], threshold_sources=SOURCES)


def failing() -> CompareResult:
    """A +30 % slowdown with a torch bump: a failed check, suspects, an env diff, notes."""
    slow = run(1, num_steps=STEPS, step_time_s=0.13, env={"torch": "2.14.0+cu128"}, config={"max_length": 1024})
    baselines = history(3, num_steps=STEPS, config={"max_length": 1024})
    return compare(slow, baselines, TIERS["default"], threshold_sources=SOURCES, allowed=["max_length"])


def neutral() -> CompareResult:
    return compare(run(1, num_steps=STEPS), [], TIERS["default"], threshold_sources=SOURCES)


def not_comparable() -> CompareResult:
    a100 = {"gpus": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB", "memory_total_mib": 81920.0}]}
    current = run(1, num_steps=STEPS, step_time_s=0.2)
    return compare(current, [run(2, num_steps=STEPS, env=a100)], TIERS["default"], threshold_sources=SOURCES)


def crashed() -> CompareResult:
    oom = Status(
        state="failed", stage="train", step=4, exception_type="OutOfMemoryError",
        message="CUDA out of memory. Tried to allocate 2.00 GiB",
    )  # fmt: skip
    return compare(run(1, num_steps=STEPS, status=oom), history(2, num_steps=STEPS), TIERS["default"])


def distributed() -> CompareResult:
    """Four DDP ranks, rank 2 half again as slow as the others: rank_imbalance fails, communication first."""
    current = dist_run(1, num_steps=STEPS, slow_rank=2, slow_factor=1.5)
    return compare(current, dist_history(3, num_steps=STEPS), TIERS["default"], threshold_sources=SOURCES)


def gpu_kernels() -> CompareResult:
    """A CUDA run whose kernels got 50 % slower: a tenth of the step, so step time moves 5 %; gpu_time fails."""

    def timed(seed: int, gpu_s: float, step_s: float) -> Any:
        rng = random.Random(seed)
        busy = [gpu_s * (1 + rng.gauss(0, 0.01)) for _ in range(STEPS)]
        kernels = [1800.0] * STEPS
        return run(seed, num_steps=STEPS, step_time_s=step_s,
                   series={schema.GPU_BUSY_S: busy, schema.NUM_GPU_KERNELS: kernels})  # fmt: skip

    baselines = [timed(100 + i, 0.010, 0.100) for i in range(3)]
    return compare(timed(1, 0.015, 0.105), baselines, TIERS["default"], threshold_sources=SOURCES)


def paired() -> CompareResult:
    """A lockstep pair whose head's compute_loss added needless work: +12 % step time, the code named first."""
    pair_id = "team-sft-pair-20261126T030000Z"
    rounds = {schema.PAIR_ROUND: [float(i // 2) for i in range(STEPS * 2)]}
    sides = {}
    for side, step_s, seed in (("base", 0.100, 7), ("head", 0.112, 8)):
        sides[side] = run(
            seed, num_steps=STEPS * 2, step_time_s=step_s, series=rounds,
            pair={"pair_id": pair_id, "side": side, "chunk_steps": 2, "tree": f"/tmp/{side}", "allocator": "tuned"},
            run={"run_id": f"{pair_id}-{side}", "git_sha": ("b" if side == "base" else "c") * 40},
        )  # fmt: skip
    code = CodeDiff(
        method="git", num_files=1, base_commit="b" * 40, head_commit="c" * 40,
        files=[CodeChange(path="team_pipeline/trainer.py", change="modified", lines_added=5, lines_removed=0,
                          added=["DIAGNOSTIC_REPEATS = 34", "with torch.no_grad():", "probe_diagnostic()"])],
    )  # fmt: skip
    return compare(sides["head"], [sides["base"]], TIERS["default"], threshold_sources=SOURCES, code=code)


def _pair_folder(head_eval: Any, **head: Any) -> CompareResult:
    with tempfile.TemporaryDirectory() as tmp:  # the folder's path is in no report: the goldens stay the same
        return run_compare(pair(Path(tmp), head_eval, **head), [])


def correctness() -> CompareResult:
    """A lockstep pair whose head's loss changed from step 3 and whose model is worse on held-out data."""
    return _pair_folder(evaluation(worse_by=0.3), loss_shift=0.02, from_step=3)


def numerics_changed() -> CompareResult:
    """A lockstep pair whose training math changed from step 1 and whose held-out figure is not worse: a pass
    that says so first."""
    return _pair_folder(evaluation(worse_by=-0.01, seed=3), loss_shift=0.01, from_step=1)


CASES: Final[dict[str, Callable[[], CompareResult]]] = {
    "passing": passing,
    "failing": failing,
    "neutral": neutral,
    "not-comparable": not_comparable,
    "crashed": crashed,
    "distributed": distributed,
    "gpu-kernels": gpu_kernels,
    "paired": paired,
    "correctness": correctness,
    "numerics-changed": numerics_changed,
}

# Each short enough to survive the shortest cut (60 characters) whole, but for the one that tests the cut.
PAYLOADS: Final = (
    "a|b||c \\| d",
    "line one\nline two\r\n| x | y |",
    "<!-- rlhf-canary:sticky:other -->",
    "<img src=x onerror=alert(1)>",
    "<script>alert(1)</script>",
    "[click](https://evil.example)",
    "![x](https://evil.example/x.png)",
    "@octocat and @org/team",
    "`code` ``two`` trailing`",
    "</details></summary></sub>",
    "# heading",
    "- list",
    "1. ordered",
    "> quote",
    "https://evil.example bare",
    "www.evil.example WWW.EVIL.EXAMPLE",
    "mailto:x@evil.example ops@evil.co",
    "\u202eevil\u202c \u2066isolate\u2069 \u200fmark\u200e",
    "nul\x00 bell\x07 esc\x1b[31m del\x7f \x85\u2028",
    "**bold** _em_ ~~strike~~ $x^2$",
    "<https://evil.example>",
    "[ref]: https://evil.example",
    "&lt;script&gt; &#x3C;b&#x3E; &amp;",
    "trailing backslash \\",
    "---",
    "    indented code",
    "```\nfenced\n```",
    "x" * 5000,
    "",
    " \t ",
)
# Closed vocabularies (Literal fields) and numbers: the schema itself refuses anything else there.
_CLOSED: Final = frozenset({"result_schema_version", "verdict", "tier", "thresholds", "status", "group", "category",
                            "format", "state", "strategy", "method"})  # fmt: skip


def everywhere(result: CompareResult, payload: str) -> CompareResult:
    """`result` with every free-text field set to `payload`."""
    return _rebuild(result, itertools.repeat(payload))


def hostile() -> CompareResult:
    """The failing result, every free-text field poisoned, with lists long enough for each payload to appear in
    each kind of field (check names, messages, env and config fields and values, op names, notes), and a
    distributed block whose backend is free text."""
    base = failing()
    n = len(PAYLOADS)
    op = OpChange(name="aten::mm", baseline_ms=1.5, current_ms=2.25, delta_ms=0.75, device=True)
    ranks = [
        RankSummary(rank=r, step_time_median_s=0.13, compute_median_s=0.1 + 0.04 * r, comm_median_s=0.03 - 0.02 * r)
        for r in range(2)
    ]
    dist = Distributed(
        world_size=2, strategy="ddp", backend="gloo", ranks=ranks, slowest_rank=1, rank_imbalance_pct=20.0
    )
    grown = base.model_copy(
        update={
            "current": base.current.model_copy(update={"distributed": dist}),
            "checks": _cycle(base.checks, n),
            "suspects": [s.model_copy(update={"evidence": ["e"] * 3, "next_steps": ["n"] * 2}) for s in base.suspects],
            "env_changes": _cycle(base.env_changes, n),
            "config_changes": [Change(field="k", baseline="1", current="2")] * n,
            "op_changes": [op] * n,
            "notes": ["note"] * n,
            "threshold_sources": ["tier default"] * 3,
        }
    )
    poisoned = _rebuild(grown, itertools.cycle(PAYLOADS))
    p = [PAYLOADS[i % n] for i in range(2 * n)]
    return poisoned.model_copy(
        update={
            "checks": [c.model_copy(update={"name": p[i], "message": p[i + 1]}) for i, c in enumerate(poisoned.checks)],
            "env_changes": [Change(field=p[i], baseline=p[i + 1], current=p[i + 2]) for i in range(n)],
            "config_changes": [Change(field=p[i + 3], baseline=p[i + 4], current=None) for i in range(n)],
            "op_changes": [o.model_copy(update={"name": p[i + 5]}) for i, o in enumerate(poisoned.op_changes)],
            "notes": list(PAYLOADS),
        }
    )


def _cycle(items: list[Any], n: int) -> list[Any]:
    return list(itertools.islice(itertools.cycle(items), n))


def _rebuild(result: CompareResult, payloads: Iterator[str]) -> CompareResult:
    return CompareResult.model_validate(_poison(result.model_dump(mode="json"), payloads))


def _poison(node: Any, payloads: Iterator[str]) -> Any:
    if isinstance(node, dict):
        return {k: v if k in _CLOSED else _poison(v, payloads) for k, v in node.items()}
    if isinstance(node, list):
        return [_poison(v, payloads) for v in node]
    if isinstance(node, str):
        return next(payloads)
    return node


def write_hostile_fixture() -> None:
    HOSTILE_FIXTURE.parent.mkdir(parents=True, exist_ok=True)
    HOSTILE_FIXTURE.write_text(hostile().model_dump_json(indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write_hostile_fixture()
    print(f"wrote {HOSTILE_FIXTURE}")
