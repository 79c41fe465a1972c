"""Bad input that once hung, grew past gigabytes or ended in a traceback (issue 14): the real `canary` command
answers each with exit 2 and a message naming the fix, within seconds and 2 GiB. A regression fails on the
timeout or the memory limit instead of hanging the suite.

Config files with a bad content are fixtures (tests/fixtures/configs/bad/); FIFOs, links and oversized files
are made here, in tmp_path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Final

import pytest

from tests.integration.test_compare_cli import save

ROOT: Final = Path(__file__).parents[2]
BAD: Final = ROOT / "tests" / "fixtures" / "configs" / "bad"
SFT: Final = ROOT / "configs" / "tiny" / "sft.yaml"
RESULT: Final = ROOT / "tests" / "fixtures" / "reports" / "hostile_result.json"
LEGACY_0_1: Final = ROOT / "tests" / "fixtures" / "baselines" / "legacy_0_1.json"
MEMORY_LIMIT: Final = 2 * 2**30
TIMEOUT_S: Final = 60

#: Fixture -> what the message says. (tests/integration/test_cli.py runs the other bad configs.)
HOSTILE_CONFIGS: Final = {
    "yaml_aliases.yaml": "YAML anchors and aliases are not supported in canary configs",
    "huge_integer.yaml": "an integer of 5,000 digits",
    "huge_hex_integer.yaml": "an integer of 17,160 bits",
    "bool_count.yaml": "max_steps: expected an integer, got true",
    "huge_dataset_size.yaml": "dataset_size: must be <= 1,000,000",
    "huge_max_length.yaml": "max_length: must be <= 131,072",
    "impossible_date.yaml": "month must be in 1..12",
}


def bounded_canary(*args: str | Path) -> subprocess.CompletedProcess[str]:
    """`canary ARGS` with its address space capped (set in the child itself, before anything is imported)."""
    code = (
        "import resource, sys\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT}, {MEMORY_LIMIT}))\n"
        "from canary_action.cli import main\n"
        "main()\n"
    )
    command = [sys.executable, "-c", code, *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=TIMEOUT_S, check=False)


def assert_refused(done: subprocess.CompletedProcess[str], *said: str) -> None:
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    assert "fix:" in done.stderr
    for text in said:
        assert text in done.stderr


@pytest.mark.parametrize(("name", "said"), HOSTILE_CONFIGS.items())
def test_a_hostile_config_is_refused_at_once(name: str, said: str, tmp_path: Path) -> None:
    assert_refused(bounded_canary("run", BAD / name, "-o", tmp_path), said)
    assert list(tmp_path.iterdir()) == []  # refused before a run directory was made


def fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def link(path: Path, target: str) -> Path:
    path.symlink_to(target)
    return path


def oversized(path: Path) -> Path:
    with path.open("wb") as file:
        file.truncate(20 * 2**20)  # sparse: 20 MiB that take no disk
    return path


NOT_A_CONFIG: Final[dict[str, tuple[Callable[[Path], Path], str]]] = {
    "fifo": (fifo, "is a named pipe (FIFO), not a regular file"),
    "device": (lambda p: link(p, "/dev/zero"), "is a character device (a link to /dev/zero), not a regular file"),
    "directory": (lambda p: (p.mkdir(), p)[1], "is a directory, not a regular file"),
    "dangling link": (lambda p: link(p, "nowhere.yaml"), "is a link to nowhere.yaml, which does not exist"),
    "oversized": (oversized, "is larger than 64 KiB (20,971,520 bytes)"),
}


@pytest.mark.parametrize("kind", NOT_A_CONFIG)
def test_a_config_that_is_not_a_small_regular_file_is_refused_before_reading(kind: str, tmp_path: Path) -> None:
    make, said = NOT_A_CONFIG[kind]
    path = make(tmp_path / "canary.yaml")
    assert_refused(bounded_canary("run", path, "-o", tmp_path / "out"), f"config file {path} {said}")


@pytest.mark.parametrize("kind", ["fifo", "device", "oversized"])
def test_a_threshold_file_is_read_by_the_same_rules(kind: str, tmp_path: Path) -> None:
    make, said = NOT_A_CONFIG[kind]
    path = make(tmp_path / "thresholds.yaml")
    current, baseline = save(tmp_path / "current.json", seed=1), save(tmp_path / "baseline.json", seed=2)
    done = bounded_canary("compare", current, baseline, "--threshold-file", path)
    assert_refused(done, f"threshold file {path} {said}")


@pytest.mark.parametrize("command", ["compare", "report", "save-baseline"])
def test_a_json_input_that_is_a_fifo_is_refused_without_waiting(command: str, tmp_path: Path) -> None:
    path = fifo(tmp_path / "input.json")
    extra = {"compare": [save(tmp_path / "baseline.json", seed=2)], "save-baseline": [tmp_path / "out.json"]}
    done = bounded_canary(command, path, *extra.get(command, []))
    assert_refused(done, f"{path} is a named pipe (FIFO), not a regular file")


# --- where the command writes ---------------------------------------------------------------------------------


def test_run_refuses_an_output_link_to_nowhere(tmp_path: Path) -> None:
    out = link(tmp_path / "out", str(tmp_path / "gone" / "runs"))
    assert_refused(bounded_canary("run", SFT, "-o", out), f"-o {out} is a link to {tmp_path / 'gone' / 'runs'}")
    assert not (tmp_path / "gone").exists()


def test_report_refuses_an_output_file_that_is_a_link_to_nowhere(tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    out = link(tmp_path / "report.md", str(tmp_path / "elsewhere" / "report.md"))
    assert_refused(bounded_canary("report", RESULT, "-o", out), f"-o {out} is a link to")
    assert list((tmp_path / "elsewhere").iterdir()) == []


def test_init_config_refuses_a_link_to_nowhere(tmp_path: Path) -> None:
    out = link(tmp_path / "canary.yaml", str(tmp_path / "outside" / "canary.yaml"))
    assert_refused(bounded_canary("init-config", out), f"OUT {out} is a link to")
    assert not (tmp_path / "outside").exists()


def metrics_file(path: Path, form: str, run_id: str) -> Path:
    """A metrics.json with this run_id, in this release's format or rlhf-canary 0.1's (run_id at its top level)."""
    if form == "0.1":
        doc = json.loads(LEGACY_0_1.read_text(encoding="utf-8"))
        path.write_text(json.dumps({**doc, "run_id": run_id}), encoding="utf-8")
        return path
    return save(path, seed=1, run={"run_id": run_id})


FORMATS: Final = ["1", "0.1"]


@pytest.mark.parametrize("form", FORMATS)
@pytest.mark.parametrize("run_id", ["../escaped", "/tmp/escaped", "a/b"])
def test_save_baseline_never_lets_the_run_id_choose_a_path(form: str, run_id: str, tmp_path: Path) -> None:
    metrics = metrics_file(tmp_path / "metrics.json", form, run_id)
    dest = tmp_path / "baselines"
    dest.mkdir()
    done = bounded_canary("save-baseline", metrics, dest)
    assert_refused(done, "is not a plain file name", f"{dest / 'baseline.json'}")
    assert list(dest.iterdir()) == []
    assert not (tmp_path / "escaped.json").exists()


@pytest.mark.parametrize("form", FORMATS)
def test_save_baseline_takes_a_trailing_slash_as_a_folder_to_create(form: str, tmp_path: Path) -> None:
    metrics = metrics_file(tmp_path / "metrics.json", form, "sft-smoke-20260105T120000Z")
    done = bounded_canary("save-baseline", metrics, f"{tmp_path / 'new' / 'baselines'}/")
    assert done.returncode == 0, done.stderr
    saved = tmp_path / "new" / "baselines" / "sft-smoke-20260105T120000Z.json"
    assert json.loads(saved.read_text(encoding="utf-8")) == json.loads(metrics.read_text(encoding="utf-8"))
    assert f"saved baseline {saved}" in done.stdout


@pytest.mark.parametrize("form", FORMATS)
def test_save_baseline_never_replaces_a_file(form: str, tmp_path: Path) -> None:
    metrics = metrics_file(tmp_path / "metrics.json", form, "main")
    folder = tmp_path / "baselines"
    folder.mkdir()
    for dest, existing in ((tmp_path / "kept.json", tmp_path / "kept.json"), (folder, folder / "main.json")):
        existing.write_text("{}", encoding="utf-8")
        assert_refused(bounded_canary("save-baseline", metrics, dest), f"{existing} exists")
        assert existing.read_text(encoding="utf-8") == "{}"


def test_save_baseline_refuses_a_link_to_nowhere(tmp_path: Path) -> None:
    metrics = save(tmp_path / "metrics.json", seed=1)
    dest = link(tmp_path / "baseline.json", str(tmp_path / "outside" / "x.json"))
    assert_refused(bounded_canary("save-baseline", metrics, dest), f"DEST {dest} is a link to")
    assert not (tmp_path / "outside").exists()


def test_the_limits_hold_for_a_command_that_would_exceed_them() -> None:
    """The harness itself: past the address-space limit the child fails (so the tests above prove a bound)."""
    code = (
        "import resource\n"
        f"resource.setrlimit(resource.RLIMIT_AS, ({MEMORY_LIMIT}, {MEMORY_LIMIT}))\n"
        "blob = bytearray(3 * 2**30)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=TIMEOUT_S, check=False)
    assert done.returncode != 0
    assert "MemoryError" in done.stderr
