"""What a child canary process gets to see: its code tree first on the import path, what a setup command
installed for it, and no token.

Training runs code from the pull request (a factory, a reward function, a collator). It runs in a child
process whose environment holds none of the action's inputs, the runner's tokens or its command files. That is
defence in depth, not a boundary: a process of the same user can still read its parent's environment
(/proc/PPID/environ) and write the runner's files, so code from an untrusted pull request belongs in a job that
was given no write token at all (docs/action.md, "Forks"). The tree (the checked-out repository, or one side
of a lockstep pair) is first on the child's import path, and nothing inside another tree is on it.

A setup command (the action's `setup` input, `canary pair --setup`) runs in the tree inside a virtual
environment of its own, layered over the image's: a `.pth` file puts the image's site-packages after the
environment's own, so what the command installs wins and everything else (torch, TRL, the canary) is the image's.
The child then runs with that environment's Python, and the fingerprint lists what the command installed
(fingerprint.py reads CANARY_SETUP_PREFIX), so a dependency bump in a pull request shows as a suspect.
"""

from __future__ import annotations

import os
import site
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Final

from canary_action.errors import ConfigError

#: Variables a child never gets: the action's inputs (the token is one), the runner's credentials, and the
#: runner's command files (a child writing GITHUB_ENV or GITHUB_PATH would change the job's later steps).
SECRET_PREFIXES: Final = ("INPUT_", "ACTIONS_")
SECRET_NAMES: Final = frozenset({
    "GITHUB_TOKEN", "GH_TOKEN", "CANARY_GITHUB_TOKEN",
    "GITHUB_ENV", "GITHUB_PATH", "GITHUB_OUTPUT", "GITHUB_STATE", "GITHUB_STEP_SUMMARY",
})  # fmt: skip
SETUP_PREFIX_ENV: Final = "CANARY_SETUP_PREFIX"
_SETUP_TAIL_LINES: Final = 20


def scrubbed(env: Mapping[str, str]) -> dict[str, str]:
    """`env` without the action's inputs, the runner's ACTIONS_* credentials and any GitHub token."""
    return {k: v for k, v in env.items() if not k.upper().startswith(SECRET_PREFIXES) and k.upper() not in SECRET_NAMES}


def child_environment(tree: Path, trees: Sequence[Path] = (), base: Mapping[str, str] | None = None) -> dict[str, str]:
    """A scrubbed copy of `base` (this process's environment) with `tree` first on PYTHONPATH and no entry inside
    `trees` (the other side of a pair) after it."""
    env = scrubbed(os.environ if base is None else base)
    others = [t.resolve() for t in trees]
    inherited = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p and not _inside(Path(p), others)]
    env["PYTHONPATH"] = os.pathsep.join([str(tree), *inherited])
    return env


def prepare_setup(command: str, tree: Path, prefix: Path, env: Mapping[str, str]) -> tuple[Path, dict[str, str]]:
    """Run the setup command in `tree` inside a new environment at `prefix`; (its python, the child env).

    Raises ConfigError (exit 2) when the command fails, with the end of its output.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(prefix)], check=True, capture_output=True)
    python = prefix / "bin" / "python"
    own = Path(
        subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            check=True, capture_output=True, text=True,
        ).stdout.strip()
    )  # fmt: skip
    image = [p for p in (*site.getsitepackages(), site.getusersitepackages()) if Path(p).is_dir()]
    # addsitedir, not a bare path: the image's own .pth files (an editable install's finder) must run too.
    lines = "".join(f"import site; site.addsitedir({p!r})\n" for p in image)
    (own / "_rlhf_canary_image.pth").write_text(lines, encoding="utf-8")
    child = {**env, "VIRTUAL_ENV": str(prefix), "PATH": f"{prefix / 'bin'}{os.pathsep}{env.get('PATH', '')}",
             SETUP_PREFIX_ENV: str(prefix)}  # fmt: skip
    # `pip` inside the environment is the image's pip module run by this environment's python.
    (prefix / "bin" / "pip").write_text(f'#!/bin/sh\nexec "{python}" -m pip "$@"\n', encoding="utf-8")
    (prefix / "bin" / "pip").chmod(0o755)
    done = subprocess.run(["/bin/sh", "-c", command], cwd=tree, env=child, capture_output=True, text=True, check=False)
    print(done.stdout + done.stderr, file=sys.stderr, end="")
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-_SETUP_TAIL_LINES:])
        raise ConfigError(
            f"the setup command failed in {tree} (exit status {done.returncode}): {command}",
            errors=[tail] if tail else [],
            fix="fix the `setup` input (it runs with `sh -c` in the checked-out repository, pip installing into a "
            "per-run environment over the image's packages)",
        )
    return python, child


def _inside(path: Path, trees: Sequence[Path]) -> bool:
    resolved = path.resolve()
    return any(resolved == t or t in resolved.parents for t in trees)
