"""Run directories are never shared: two canaries started in the same second keep their own files."""

from __future__ import annotations

from pathlib import Path

from canary_action.config.load import load_config
from canary_action.train.launch.outcome import new_run_dir

SFT = Path(__file__).parents[2] / "configs" / "tiny" / "sft.yaml"


def test_runs_started_in_the_same_second_get_their_own_directories(tmp_path: Path) -> None:
    config = load_config(SFT).config
    made = [new_run_dir(config, tmp_path) for _ in range(3)]
    ids = [run_id for run_id, _, _ in made]
    assert len(set(ids)) == 3
    assert all(path.is_dir() and path.name == run_id for run_id, path, _ in made)
    stems = {run_id.split("Z")[0] for run_id in ids}
    if len(stems) == 1:  # the same second (nearly always): numbered, the first one bare
        assert ids[1] == f"{ids[0]}-2"
        assert ids[2] == f"{ids[0]}-3"


def test_an_existing_directory_is_never_reused(tmp_path: Path) -> None:
    config = load_config(SFT).config
    run_id, path, _ = new_run_dir(config, tmp_path, kind="pair")
    assert run_id.startswith("tiny-sft-pair-")
    (path / "metrics.json").write_text("{}", encoding="utf-8")
    again, other, _ = new_run_dir(config, tmp_path, kind="pair")
    assert other != path
    assert (path / "metrics.json").read_text(encoding="utf-8") == "{}"
    assert again != run_id
