"""What changed between the baseline and the current run: environment, config and profiled ops.

Plain field-by-field diffs, rendered as strings for the reports. They make no judgement; `suspects.py`
weighs them against the checks that failed.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from canary_action.compare.result import Change, OpChange
from canary_action.config.blocks import DistributedConfig, FaultInjection
from canary_action.metrics.schema import EnvFingerprint, ProfilerSummary

# Libraries first: a moved version is the usual cause of a regression nobody wrote. Then the hardware, then the
# rest. fingerprint_hash is left out: it only says that something above differs.
LIBRARY_FIELDS: Final = (
    "torch", "cuda", "cudnn", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers",
    "bitsandbytes", "nccl",
)  # fmt: skip
#: Packages a setup command installed over the image show as f"{SETUP_PREFIX}{name}" (fingerprint setup_packages).
SETUP_PREFIX: Final = "setup:"
HARDWARE_FIELDS: Final = ("gpu", "gpu_count", "gpu_driver", "cpu_model", "cpu_count", "torch_threads")
OTHER_FIELDS: Final = (
    "python",
    "container_image",
    "container_image_revision",
    "container_image_digest",
    "canary",
    "platform",
)

# Config keys that never change what a run measures: names, paths and the wall-clock limit (a run that hits it
# stops early, and run_status reports that). A changed key here is no explanation for anything.
IGNORED_CONFIG_KEYS: Final = frozenset({"name", "description", "output_dir", "profiler.output_dir", "timeout_minutes"})
#: What a pull request may change in its canary config and still be judged against the default branch's runs: the
#: keys above, and `thresholds` (the default branch's are used anyway). Anything else fails its check in report mode
#: unless a maintainer accepts the change (github/report_mode.py); docs/action.md lists these, a test checks it.
PULL_REQUEST_MAY_CHANGE: Final = (*sorted(IGNORED_CONFIG_KEYS), "thresholds")
MAX_VALUE_CHARS: Final = 80
#: Keys newer configs always carry, with the value a config written before them meant: one process, torch's own
#: thread count (`auto`: configs before cpu_threads left it to torch), and the GPU's time measured where there is
#: one (a baseline from before gpu_time: otherwise every comparison would list "gpu_time none → true").
IMPLIED: Final[Mapping[str, Any]] = {"num_processes": 1, "cpu_threads": "auto", "gpu_time": True}
#: Optional sections: null in a config that leaves them out, every key in one that sets any. The side without
#: the section reads as its defaults, so that setting one key shows that key, not every default beside it.
SECTION_DEFAULTS: Final[Mapping[str, Mapping[str, Any]]] = {
    "fault_injection": FaultInjection().model_dump(mode="json"),
    "distributed": DistributedConfig().model_dump(mode="json"),
}


def env_changes(baseline: EnvFingerprint, current: EnvFingerprint) -> list[Change]:
    """Every fingerprint field that differs, libraries first; GPU names compare as one field, "gpu"."""
    before, after = _env_fields(baseline), _env_fields(current)
    fixed = [
        Change(field=name, baseline=before[name], current=after[name])
        for name in (*LIBRARY_FIELDS, *HARDWARE_FIELDS, *OTHER_FIELDS)
        if before[name] != after[name]
    ]
    installed = sorted(baseline.setup_packages.keys() | current.setup_packages.keys(), key=str.lower)
    setup = [
        Change(field=SETUP_PREFIX + name, baseline=baseline.setup_packages.get(name),
               current=current.setup_packages.get(name))
        for name in installed
        if baseline.setup_packages.get(name) != current.setup_packages.get(name)
    ]  # fmt: skip
    libraries = [f for f in fixed if f.field in LIBRARY_FIELDS]
    return [*libraries, *setup, *(f for f in fixed if f.field not in LIBRARY_FIELDS)]


def config_changes(baseline: Mapping[str, Any], current: Mapping[str, Any]) -> list[Change]:
    """Differing keys of two resolved configs, as dotted paths in the baseline's key order, then new keys.

    A key set to null and a missing key read the same (None): an optional section switched on then shows only
    the leaves it sets, not a null beside each of them.
    """
    before, after = _flatten(_with_sections(baseline, current)), _flatten(_with_sections(current, baseline))
    # A section that does not apply to a side (distributed settings of one process) is compared as its
    # defaults, so that only keys set away from them show, but shown as absent: that run had none.
    shown_before, shown_after = _shown(baseline, before), _shown(current, after)
    keys = [*before, *(k for k in after if k not in before)]
    return [
        Change(field=key, baseline=_render(shown_before.get(key)), current=_render(shown_after.get(key)))
        for key in keys
        if key not in IGNORED_CONFIG_KEYS and before.get(key) != after.get(key)
    ]


def op_changes(
    baseline: ProfilerSummary | None,
    baseline_steps: int | None,
    current: ProfilerSummary | None,
    current_steps: int | None,
    *,
    top: int = 10,
) -> list[OpChange]:
    """The `top` ops whose self time per profiled step moved most, either way, growth first.

    Device time when either window recorded any (on a GPU the host time mostly measures kernel launches),
    else CPU time. An op in one window's top-ops list only gets None on the other side: it may be new or gone, or
    just below that window's top-k cut, anywhere from 0 to that window's smallest listed time. Its change is the
    smallest it can be (an op that left the list fell by at least its time minus that cut), and 0, left out, when
    the cut alone could explain it: an op missing from a list is unknown, not 0 ms.
    """
    if baseline is None or current is None or not baseline_steps or not current_steps:
        return []
    device = _has_device_time(baseline) or _has_device_time(current)
    before = _per_step(baseline, baseline_steps, device=device)
    after = _per_step(current, current_steps, device=device)
    before_cut, after_cut = min(before.values(), default=0.0), min(after.values(), default=0.0)

    def delta(name: str) -> float:
        if name not in after:
            return min(0.0, after_cut - before[name])
        if name not in before:
            return max(0.0, after[name] - before_cut)
        return after[name] - before[name]

    changes = [
        OpChange(
            name=name, baseline_ms=before.get(name), current_ms=after.get(name), delta_ms=delta(name), device=device
        )
        for name in [*before, *(n for n in after if n not in before)]
    ]
    moved = sorted((c for c in changes if c.delta_ms != 0), key=lambda c: abs(c.delta_ms), reverse=True)[:top]
    return sorted(moved, key=lambda c: c.delta_ms, reverse=True)


def _env_fields(env: EnvFingerprint) -> dict[str, str | None]:
    fields = {name: getattr(env, name) for name in (*LIBRARY_FIELDS, *HARDWARE_FIELDS, *OTHER_FIELDS) if name != "gpu"}
    fields["gpu"] = ", ".join(g.name for g in env.gpus) or None
    return {name: None if value is None else str(value) for name, value in fields.items()}


def _with_sections(config: Mapping[str, Any], other: Mapping[str, Any]) -> dict[str, Any]:
    """`config` with the implied keys, and each optional section either side sets filled with its defaults."""
    filled = {**IMPLIED, **config}
    for section, defaults in SECTION_DEFAULTS.items():
        own = filled.get(section)
        if own is not None or other.get(section) is not None:
            filled[section] = {**defaults, **(own or {})}
    return filled


def _shown(config: Mapping[str, Any], flat: Mapping[str, Any]) -> dict[str, Any]:
    """The filled config as it reads for `config`'s run: without a distributed section for a single process."""
    if config.get("distributed") is None and config.get("num_processes", 1) == 1:
        return {k: v for k, v in flat.items() if not k.startswith("distributed.")}
    return dict(flat)


def _flatten(config: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    flat: dict[str, Any] = {}
    for key, value in config.items():
        path = f"{prefix}{key}"
        if isinstance(value, Mapping):
            flat.update(_flatten(value, f"{path}."))
        elif value is not None:
            flat[path] = value
    return flat


def _render(value: Any) -> str | None:
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str)
    return text if len(text) <= MAX_VALUE_CHARS else text[: MAX_VALUE_CHARS - 1] + "…"


def _has_device_time(summary: ProfilerSummary) -> bool:
    return summary.device_time_total_ms > 0 or any(op.device_self_time_ms > 0 for op in summary.top_ops)


def _per_step(summary: ProfilerSummary, steps: int, *, device: bool) -> dict[str, float]:
    times: dict[str, float] = {}
    for op in summary.top_ops:  # the same name twice (overloads listed apart) counts as one op
        ms = op.device_self_time_ms if device else op.cpu_self_time_ms
        times[op.name] = times.get(op.name, 0.0) + ms / steps
    return times
