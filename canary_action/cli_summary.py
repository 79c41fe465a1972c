"""What `canary run` prints when a run ends: the summary of its metrics.json, a line a measure."""

from __future__ import annotations

from pathlib import Path

from canary_action.metrics.heldout import METRICS, HeldoutEval
from canary_action.metrics.schema import Distributed, Metrics
from canary_action.report.escape import one_line


def run_summary(metrics: Metrics, path: Path) -> str:
    s, status = metrics.summary, metrics.status
    lines = [
        f"run {metrics.run.run_id}: {status.state}"
        + (f" ({status.reason} at step {status.step})" if status.reason else "")
    ]
    lines.append(f"  duration        {metrics.run.duration_s or 0:.1f} s, {s.num_steps if s else 0} steps")
    if startup := metrics.run.startup_s:
        parts = ", ".join(f"{k.replace('_', ' ')} {v:.1f}" for k, v in startup.items() if k != "to_step_1")
        lines.append(f"  start           {startup.get('to_step_1', 0):.1f} s to step 1 ({parts})")
    if s is not None and s.step_time_s is not None:
        lines.append(
            f"  step time       median {s.step_time_s.median:.4f} s, mean {s.step_time_s.mean:.4f} s "
            f"({s.num_steady_steps} steady steps after {s.warmup_steps} warm-up, {s.warmup_method})"
        )
        lines.append(f"  tokens/s        {s.tokens_per_s or 0:,.0f} (measured)")
    if s is not None and s.peak_allocated_mib is not None:
        lines.append(
            f"  peak memory     {s.peak_allocated_mib:,.0f} MiB allocated, {s.peak_reserved_mib or 0:,.0f} MiB reserved"
        )
    if s is not None and s.gpu_busy_median_s is not None:
        share = f" ({100 * s.gpu_busy_share:.0f} % of the step)" if s.gpu_busy_share is not None else ""
        lines.append(f"  GPU time        {1000 * s.gpu_busy_median_s:.1f} ms busy per step{share}")
    if s is not None and s.host_peak_rss_mib is not None:  # the high-water mark, the figure host_memory judges
        sampled = f"; {s.host_rss_peak_mib:,.0f} MiB at step ends" if s.host_rss_peak_mib is not None else ""
        lines.append(f"  host RSS peak   {s.host_peak_rss_mib:,.0f} MiB (high-water mark{sampled})")
    elif s is not None and s.host_rss_peak_mib is not None:
        lines.append(f"  host RSS peak   {s.host_rss_peak_mib:,.0f} MiB (sampled at step ends)")
    lines += _ranks_report(metrics.distributed)
    lines.append(
        f"  non-finite      {metrics.stability.num_nan_steps} NaN steps, {metrics.stability.num_inf_steps} Inf steps"
    )
    if s is not None and s.final_loss is not None:
        lines.append(f"  loss            final {s.final_loss:.4f}, tail mean {s.tail_mean_loss or 0:.4f}")
    lines += _heldout(metrics.heldout)
    if metrics.profiler is not None:
        p = metrics.profiler
        lines.append(f"  profiler        steps {p.start_step}-{p.end_step}, trace {p.trace_path}")
    # A window the run stopped before (or inside): the notice train/profiler.py wrote says what is missing.
    shortfall = [notice.removeprefix("profiler: ") for notice in metrics.notices if notice.startswith("profiler: ")]
    lines += [f"  profiler        {notice}" for notice in shortfall]
    # What was captured for `canary replay`, its bytes and its cost (train/capture.py).
    lines += [f"  capture         {n.removeprefix('capture: ')}" for n in metrics.notices if n.startswith("capture: ")]
    lines.append(f"  metrics         {path}")
    return "\n".join(lines)


def _heldout(evaluation: HeldoutEval | None) -> list[str]:
    """The held-out figure at each evaluated step, and what the evaluation cost once training had ended."""
    if evaluation is None:
        return []
    if evaluation.status != "evaluated" or evaluation.metric is None:
        return [f"  held-out        {evaluation.status}: {one_line(evaluation.message or '', 300)}"]
    label, unit, better = METRICS[evaluation.metric]
    path = " → ".join(f"{p.value:.4g}" for p in evaluation.points)
    steps = ", ".join(str(p.step) for p in evaluation.points)
    cost = f", {evaluation.wall_s:.1f} s after training" if evaluation.wall_s is not None else ""
    lines = [
        f"  held-out        {label.removeprefix('held-out ')} {path} {unit} at steps {steps} ({better} is better; "
        f"{evaluation.num_examples} examples{cost})"
    ]
    learned = evaluation.learning()
    if learned is not None:  # how measurably it learns: the figure a team sizes its canary by
        mean, se = learned
        said = f"  learned         {mean:+.3g} {unit} ({mean / se:.0f}× its standard error)" if se > 0 else ""
        if said and mean < 2 * se:
            said += "; too little to judge learning: docs/correctness.md, 'Sizing a canary'"
        lines += [said] if said else []
    return lines


def _ranks_report(dist: Distributed | None) -> list[str]:
    """World size, then per rank: compute and communication medians (the straggler has the largest compute)."""
    if dist is None:
        return []
    head = f"  processes       {dist.world_size} ({dist.strategy}, {dist.backend or '-'})"
    if dist.slowest_rank is not None and dist.rank_imbalance_pct is not None:
        head += f", slowest rank {dist.slowest_rank} (+{dist.rank_imbalance_pct:.1f} % compute)"
    lines = [head]
    for rank in dist.ranks:
        compute = f"{rank.compute_median_s:.4f} s" if rank.compute_median_s is not None else "-"
        comm = f"{rank.comm_median_s:.4f} s" if rank.comm_median_s is not None else "not measured"
        lines.append(f"  rank {rank.rank:<10} compute {compute}, communication {comm} (medians per step)")
    return lines
