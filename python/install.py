"""The python action's install step: rlhf-canary beside the job's own Python packages, replacing none of them.

Run by the job's interpreter, isolated (`python -I install.py PREFIX`), with the standard library alone. It makes
an environment at PREFIX that sees the job's packages (its torch, transformers, TRL, and the team's own code:
their site folders are added with their .pth files, as the setup input's environment does) and installs into
PREFIX only what they lack: rlhf-canary itself, and whatever of its core and `[train]` requirements is missing.
Every package the job's Python already has is pinned at its version (a pip constraint), so pip keeps it or
fails naming the conflict; nothing of the job's environment is written. Writes the new environment's python to
GITHUB_OUTPUT as `python`.

Exit status: 0 installed; 2 the job's Python or a package of it cannot serve (the message names it and the fix);
3 the install itself failed (the index unreachable: pip's message above).
"""

from __future__ import annotations

import os
import re
import shutil
import site
import subprocess
import sys
from pathlib import Path

#: What building rlhf-canary reads from the action's checkout (the Dockerfile copies the same).
SOURCES = ("pyproject.toml", "README.md", "canary_action", "templates")
#: The training stack checked against the `[train]` extra's ranges, as `canary run` checks it (extras.py).
CHECK = """
import sys
from canary_action.errors import CanaryError
from canary_action.extras import require_training_stack
try:
    require_training_stack("the python action")
except CanaryError as error:
    print(error.message)
    print(error.fix)
    sys.exit(2)
"""
#: A version pip reads as PEP 440 (a constraint of anything else would stop pip before it starts).
PEP440 = re.compile(r"^\d[\w.!+-]*$")


def main(prefix: Path, root: Path) -> int:
    if sys.version_info < (3, 11):  # noqa: UP036 -- run by the job's Python, whatever its version
        return _refuse(
            f"rlhf-canary needs Python 3.11 or later, and this job's python is {sys.version.split()[0]} "
            f"({sys.executable})",
            "give the action's `python` input the path of the Python 3.11+ that has your training stack",
        )
    job_sites = [p for p in (*site.getsitepackages(), site.getusersitepackages()) if Path(p).is_dir()]
    _step([sys.executable, "-I", "-m", "venv", "--clear", "--without-pip", str(prefix)])
    python = prefix / "bin" / "python"
    purelib = Path(
        _step([str(python), "-I", "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"]).strip()
    )
    # addsitedir, not a bare path: the job's own .pth files (an editable install of the team's code) run too.
    lines = "".join(f"import site; site.addsitedir({p!r})\n" for p in job_sites)
    (purelib / "_rlhf_canary_job_packages.pth").write_text(lines, encoding="utf-8")
    if subprocess.run([str(python), "-I", "-m", "pip", "--version"], capture_output=True, check=False).returncode:
        _step([str(python), "-I", "-m", "ensurepip", "--default-pip"])  # a job's Python without pip (uv's venvs)
    constraints = prefix / "job-packages.txt"
    constraints.write_text("".join(f"{name}=={version}\n" for name, version in _job_packages(python)), "utf-8")
    source = prefix / "src"
    shutil.rmtree(source, ignore_errors=True)
    source.mkdir()
    for name in SOURCES:  # built from a copy: nothing is written into the action's checkout
        if (root / name).is_dir():
            shutil.copytree(root / name, source / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(root / name, source / name)
    install = [str(python), "-I", "-m", "pip", "install", "--disable-pip-version-check", "--no-input",
               "--constraint", str(constraints), f"{source}[train]"]  # fmt: skip
    print(f"rlhf-canary: installing beside {sys.executable}'s packages, each kept at its version", flush=True)
    done = subprocess.run(install, check=False, capture_output=True, text=True)
    print(done.stdout + done.stderr, end="", flush=True)
    if done.returncode != 0:
        return _refuse(
            "rlhf-canary could not be installed without replacing a package of this job's Python (pip's reason is "
            "above: a `(constraint)` line is yours, at the version you have)",
            "upgrade that package in your environment into the supported range (pyproject.toml's [train] extra), "
            "or use the Docker action, whose image holds a supported stack (docs/adopt.md#which-action); an "
            "unreachable package index is the other cause: set PIP_INDEX_URL for the job",
            code=2 if "ResolutionImpossible" in done.stdout + done.stderr else 3,
        )
    verdict = subprocess.run([str(python), "-I", "-c", CHECK], capture_output=True, text=True, check=False)
    if verdict.returncode != 0:  # a package of the job's that pip let be, outside the range rlhf-canary supports
        print(verdict.stdout + verdict.stderr, end="")
        said = verdict.stdout.strip().splitlines()
        return _refuse(
            said[0] if said else "the installed rlhf-canary does not import",
            said[1] if len(said) > 1 else "read the output above",
        )
    output = os.environ.get("GITHUB_OUTPUT")
    if output:
        with Path(output).open("a", encoding="utf-8") as file:
            file.write(f"python={python}\n")
    print(f"rlhf-canary: installed; its python is {python}")
    return 0


def _job_packages(python: Path) -> list[tuple[str, str]]:
    """(name, version) of every distribution the job's Python has, as the new environment sees them."""
    listing = (
        "import importlib.metadata as m\n"
        "for d in m.distributions():\n"
        "    name = d.metadata['Name']\n"
        "    if name: print(name + ' ' + d.version)\n"
    )
    found = {}
    for line in _step([str(python), "-I", "-c", listing]).splitlines():
        name, _, version = line.partition(" ")
        key = re.sub(r"[-_.]+", "-", name).lower()
        if key != "rlhf-canary" and PEP440.match(version) and key not in found:
            found[key] = (name, version)  # the first on the path, as imports find it
    return sorted(found.values())


def _step(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        print(done.stdout + done.stderr, end="", flush=True)
        raise SystemExit(
            _refuse(f"{' '.join(command[:5])} failed (exit {done.returncode})", "read the output above", code=3)
        )
    return done.stdout


def _refuse(message: str, fix: str, *, code: int = 2) -> int:
    print(f"::error title=rlhf-canary could not install::{message}%0A  fix: {fix}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]), Path(sys.argv[2]) if len(sys.argv) > 2 else Path(__file__).resolve().parents[1]))
