"""scripts/build-image.sh (issue 35): before a release, a team builds and pushes the runner image in one command and
is told the `image:` line to use. No Docker engine here: a fake `docker` records what it was asked."""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "build-image.sh"
FAKE = """#!/bin/sh
echo "$*" >> "$DOCKER_LOG"
if [ "$1" = inspect ]; then echo "ghcr.io/acme/rlhf-canary@sha256:$(printf '%064d' 7)"; fi
"""


def build(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    docker = tmp_path / "docker"
    docker.write_text(FAKE, encoding="utf-8")
    docker.chmod(0o755)
    log = tmp_path / "calls"
    done = subprocess.run(
        ["bash", str(SCRIPT), *args], capture_output=True, text=True, check=False, timeout=60,
        env={"PATH": "/usr/bin:/bin", "DOCKER": str(docker), "DOCKER_LOG": str(log)},
    )  # fmt: skip
    return done, log.read_text(encoding="utf-8").splitlines() if log.exists() else []


def test_it_builds_tags_pushes_and_names_the_digest(tmp_path: Path) -> None:
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    done, calls = build(tmp_path, "ghcr.io/acme/rlhf-canary")
    assert done.returncode == 0, done.stderr
    assert calls[0].startswith(f"build --build-arg VERSION={version} --build-arg REVISION=")
    assert calls[0].endswith(f"-t ghcr.io/acme/rlhf-canary:{version} .")
    assert calls[1] == f"push ghcr.io/acme/rlhf-canary:{version}"
    digest = "ghcr.io/acme/rlhf-canary@sha256:" + "0" * 63 + "7"
    assert f"image: docker://{digest}" in done.stdout


def test_no_push_and_bad_names(tmp_path: Path) -> None:
    done, calls = build(tmp_path, "ghcr.io/acme/rlhf-canary", "--no-push")
    assert done.returncode == 0
    assert [c.split()[0] for c in calls] == ["build"]
    for name in ("rlhf-canary", "ghcr.io/acme/rlhf-canary:1.0", "ghcr.io/acme/x@sha256:1"):
        refused, _ = build(tmp_path, name)
        assert refused.returncode == 2, name
        assert "REGISTRY/NAME" in refused.stderr
    usage, _ = build(tmp_path)
    assert usage.returncode == 2
    assert "usage: bash scripts/build-image.sh REGISTRY/NAME" in usage.stderr


def test_image_md_builds_from_this_versions_image() -> None:
    """Issue 35: image.md told teams to build FROM the predecessor's 0.1.0, which this project never published."""
    version = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["version"]
    froms = [line for line in (ROOT / "docs" / "image.md").read_text().splitlines() if line.startswith("FROM ")]
    assert froms == [f"FROM ghcr.io/your-org/rlhf-canary:{version}@sha256:<digest>"]
