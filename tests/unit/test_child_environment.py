"""What a child canary process sees (train/launch/environment.py): no token, its tree first on the import path,
and what a setup command installed — which the fingerprint records and the comparison names as a suspect."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from canary_action.compare.diff import env_changes
from canary_action.errors import ConfigError
from canary_action.train.launch.environment import child_environment, prepare_setup, scrubbed
from tests.factories import make_env


def test_the_token_and_the_action_inputs_never_reach_a_child() -> None:
    env = {"INPUT_GITHUB-TOKEN": "ghs_x", "INPUT_GITHUB_TOKEN": "ghs_x", "INPUT_CONFIG": "c.yaml",
           "ACTIONS_RUNTIME_TOKEN": "t", "ACTIONS_ID_TOKEN_REQUEST_TOKEN": "t", "GITHUB_TOKEN": "ghs_y",
           "GH_TOKEN": "ghs_z", "HOME": "/root", "GITHUB_SHA": "abc", "HF_HOME": "/cache",
           "GITHUB_ENV": "/f/env", "GITHUB_PATH": "/f/path", "GITHUB_OUTPUT": "/f/out", "GITHUB_STATE": "/f/s",
           "GITHUB_STEP_SUMMARY": "/f/sum"}  # fmt: skip
    assert scrubbed(env) == {"HOME": "/root", "GITHUB_SHA": "abc", "HF_HOME": "/cache"}


def test_the_tree_goes_last_nothing_goes_first_and_the_other_tree_nowhere(tmp_path: Path) -> None:
    mine, theirs, lib = tmp_path / "head", tmp_path / "base", tmp_path / "lib"
    for d in (mine, theirs, lib):
        d.mkdir()
    base = {"PYTHONPATH": os.pathsep.join([str(theirs / "src"), str(lib), str(mine)]), "INPUT_X": "1"}
    env = child_environment(mine, [theirs], base)
    assert env["PYTHONPATH"].split(os.pathsep) == [str(lib)]
    assert (env["CANARY_CODE_TREE"], env["PYTHONSAFEPATH"]) == (str(mine), "1")
    assert "INPUT_X" not in env


SHADOW = "import pathlib; pathlib.Path({marker!r}).write_text('shadowed'); raise SystemExit('shadowed {name}')\n"


def test_a_pull_requests_top_level_folders_shadow_no_library_and_its_modules_still_import(tmp_path: Path) -> None:
    """Every file of a pull request is code: a `yaml/` or `accelerate/` in the tree must not replace the real one
    (python -m and -c put the working directory first), while the team's own module still imports."""
    tree = tmp_path / "pr"
    marker = tmp_path / "shadow-ran"
    for name in ("yaml", "accelerate", "pydantic"):
        (tree / name).mkdir(parents=True)
        (tree / name / "__init__.py").write_text(SHADOW.format(marker=str(marker), name=name))
    (tree / "team_pipeline.py").write_text("WHERE = __file__\n")
    probe = (
        "import canary_action, yaml, pydantic, importlib.util, team_pipeline\n"
        "print(yaml.__file__); print(pydantic.__file__); print(team_pipeline.WHERE)\n"
        "print(importlib.util.find_spec('accelerate').origin)\n"
    )
    for how in (["-c", probe], ["-m", "canary_action", "--help"]):
        done = subprocess.run(
            [sys.executable, *how], cwd=tree, env=child_environment(tree), capture_output=True, text=True, check=False
        )
        assert done.returncode == 0, done.stderr
        assert not marker.exists(), f"{how[0]}: the pull request's folder was imported"
    yaml_file, pydantic_file, team, accelerate = done_lines = subprocess.run(
        [sys.executable, "-c", probe], cwd=tree, env=child_environment(tree), capture_output=True, text=True, check=True
    ).stdout.split()
    assert str(tree) not in yaml_file + pydantic_file + accelerate, done_lines
    assert team == str(tree / "team_pipeline.py")


def wheel(directory: Path, version: str) -> Path:
    """A minimal pure-Python wheel (no build backend needed offline)."""
    path = directory / f"fakepkg-{version}-py3-none-any.whl"
    info = f"fakepkg-{version}.dist-info"
    files = {
        "fakepkg/__init__.py": f"VERSION = {version!r}\n",
        f"{info}/METADATA": f"Metadata-Version: 2.1\nName: fakepkg\nVersion: {version}\n",
        f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    files[f"{info}/RECORD"] = "".join(f"{name},,\n" for name in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(path, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    return path


def test_a_setup_command_installs_over_the_image_and_the_fingerprint_lists_it(tmp_path: Path) -> None:
    package = wheel(tmp_path, "1.0")
    python, env = prepare_setup(f"pip install -q --no-index {package}", tmp_path, tmp_path / "env", os.environ)
    probe = "import fakepkg, canary_action; from canary_action.fingerprint import collect_environment as c; "
    probe += "print(fakepkg.VERSION, c().setup_packages)"
    done = subprocess.run([str(python), "-c", probe], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "1.0 {'fakepkg': '1.0'}"
    assert not (Path(os.__file__).parent / "site-packages" / "fakepkg").exists(), "the image is untouched"


def test_a_failing_setup_command_is_a_config_error_with_its_output(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as caught:
        prepare_setup("echo resolving; exit 7", tmp_path, tmp_path / "env", os.environ)
    assert "exit status 7" in caught.value.message
    assert "resolving" in caught.value.errors[0]
    assert "`setup` input" in caught.value.fix


def test_a_package_the_setup_moved_is_an_environment_change() -> None:
    before, after = make_env(setup_packages={"fakepkg": "1.0"}), make_env(setup_packages={"fakepkg": "2.0"})
    changes = env_changes(before, after)
    assert [(c.field, c.baseline, c.current) for c in changes] == [("setup:fakepkg", "1.0", "2.0")]
    assert before.fingerprint_hash != after.fingerprint_hash
    assert make_env().fingerprint_hash == make_env(setup_packages={}).fingerprint_hash


def test_a_slowdown_with_a_setup_package_bump_names_the_package() -> None:
    from canary_action.compare.runs import from_metrics
    from canary_action.compare.verdict import compare
    from canary_action.config.thresholds import TIERS
    from tests.factories import make_metrics

    old, new = {"setup_packages": {"fakepkg": "1.0"}}, {"setup_packages": {"fakepkg": "2.0"}}
    # One canary (config, data): only the environment and the speed differ.
    same = {"config": {"seed": 0}, "workload": {"dataset_fingerprint": "d" * 64}}
    baselines = [from_metrics(make_metrics(seed=s, env=old, **same), f"b{s}") for s in range(3)]
    current = from_metrics(make_metrics(seed=9, step_time_s=0.13, env=new, **same), "current")
    result = compare(current, baselines, TIERS["default"])
    assert result.verdict == "regression", result.reason
    dependency = next(s for s in result.suspects if s.category == "dependency")
    assert "fakepkg 1.0 → 2.0, installed by the setup command" in dependency.summary
    assert dependency.next_steps[0].startswith("pin fakepkg==1.0")


def test_making_the_setup_environment_runs_nothing_of_the_tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`python -m venv` and the sysconfig probe ran from the action's working directory, the pull request's
    checkout, with the action's environment: a top-level venv.py there ran with the token (issue 25)."""
    tree = tmp_path / "tree"
    tree.mkdir()
    for name in ("venv", "sysconfig"):
        (tree / f"{name}.py").write_text(
            f"import os, pathlib\npathlib.Path({str(tmp_path)!r}, '{name}-ran').write_text(repr(sorted(os.environ)))\n"
        )
    monkeypatch.chdir(tree)  # where the action runs: the workspace
    monkeypatch.setenv("INPUT_GITHUB-TOKEN", "ghs_secret")
    python, env = prepare_setup("true", tree, tmp_path / "setup" / "env", scrubbed(os.environ))
    assert python.is_file()
    assert not (tmp_path / "venv-ran").exists()
    assert not (tmp_path / "sysconfig-ran").exists()
    assert "INPUT_GITHUB-TOKEN" not in env
