"""Consistency checks of the runner image's inputs, made from the outside: no Docker engine builds it here.

Each check takes paths and returns its problems as sentences (cause and fix), an empty list when all agree.
tests/unit/test_image.py runs them on the repository's files and, to show each can fail, on the small bad
files in tests/fixtures/image/. The image's contract:

- requirements/image.lock (bash scripts/lock-image.sh) pins, with hashes, every package the pyproject's core
  and [train] extra need, inside their ranges, from the public PyPI;
- CI trains on the same stack: requirements/ci-constraints.txt and the running venv agree with the lock;
- action.yml runs the image of the package's own version;
- the Dockerfile pins its base by digest, on the CUDA major of the locked torch; installs the lock with
  --require-hashes before it copies the package; runs an entrypoint that exists; installs the lock's Python;
  and tells the fingerprint which image it is;
- .dockerignore lets every file the Dockerfile copies into the build context;
- every folder the wheel is built from (canary_action/, and each folder pyproject's package-dir maps into the
  package, such as templates/) is copied beside pyproject.toml before the package is installed.
"""

from __future__ import annotations

import json
import re
import shlex
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path, PurePosixPath
from typing import Any, Final

import yaml
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import NormalizedName, canonicalize_name
from packaging.version import InvalidVersion, Version

from canary_action.fingerprint import IMAGE_REVISION_VAR, IMAGE_VAR

#: The packages whose versions make a canary's numbers: CI, the lock and the venv must agree on these.
TRAINING_STACK: Final = ("torch", "transformers", "trl", "peft", "accelerate", "datasets", "tokenizers")
#: The image's interpreter and platform, for the pyproject's environment markers (scripts/lock-image.sh).
IMAGE_MARKERS: Final = {
    "implementation_name": "cpython",
    "platform_python_implementation": "CPython",
    "os_name": "posix",
    "sys_platform": "linux",
    "platform_system": "Linux",
    "platform_machine": "x86_64",
}
PUBLIC_INDEX: Final = "https://pypi.org/simple"
IMAGE_REPOSITORY: Final = "ghcr.io/rlhf-canary/rlhf-canary"
LOCK_SOURCE: Final = "requirements/image.lock"
REGENERATE: Final = "run bash scripts/lock-image.sh"
_SHA256: Final = re.compile(r"--hash=sha256:([0-9a-f]{64})\b")
_DIGEST: Final = re.compile(r"@sha256:[0-9a-f]{64}$")


# --- the lock -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Pin:
    name: NormalizedName
    version: Version
    hashes: tuple[str, ...]
    line: int


def read_lock(path: Path) -> tuple[dict[NormalizedName, Pin], list[str], list[str]]:
    """(pins by name, option lines such as --index-url, problems) of a pip requirements file in lock form."""
    pins: dict[NormalizedName, Pin] = {}
    options: list[str] = []
    problems: list[str] = []
    for line, text in _logical_lines(path.read_text(encoding="utf-8")):
        if text.startswith("-"):
            options.append(text)
            continue
        where = f"{path.name}:{line}"
        spec, _, _ = text.partition(" --hash=")
        try:
            requirement = Requirement(spec.strip())
        except InvalidRequirement as error:
            problems.append(f"{where}: cannot be parsed ({error}); {REGENERATE}")
            continue
        name = canonicalize_name(requirement.name)
        specifiers = list(requirement.specifier)
        if len(specifiers) != 1 or specifiers[0].operator != "==" or "*" in specifiers[0].version:
            problems.append(f"{where}: {spec.strip()} is not pinned with == to one version; {REGENERATE}")
            continue
        hashes = tuple(_SHA256.findall(text))
        if not hashes:
            problems.append(
                f"{where}: {spec.strip()} has no --hash=sha256: (pip --require-hashes refuses it); {REGENERATE}"
            )
        if name in pins:
            problems.append(f"{where}: {name} is pinned twice (also on line {pins[name].line}); {REGENERATE}")
        pins[name] = Pin(name, Version(specifiers[0].version), hashes, line)
    return pins, options, problems


def lock_problems(
    lock: Path, pyproject: Path, *, python_version: str = "3.12", extras: tuple[str, ...] = ("train",)
) -> list[str]:
    """Every core/extra requirement is locked inside its range; every pin is hashed, public and no local build."""
    pins, options, problems = read_lock(lock)
    for option in options:
        flag, _, value = option.partition(" ")
        if flag != "--index-url" or value.strip() != PUBLIC_INDEX:
            problems.append(
                f"{lock.name}: `{option}`: the lock must come from {PUBLIC_INDEX} alone (a local mirror's torch is a"
                f" CPU build with other hashes); {REGENERATE}"
            )
    for pin in pins.values():
        if pin.version.local is not None:
            problems.append(
                f"{lock.name}:{pin.line}: {pin.name}=={pin.version} is a local build (+{pin.version.local}), not"
                f" PyPI's; {REGENERATE}"
            )
    markers = {**IMAGE_MARKERS, "python_version": python_version, "python_full_version": f"{python_version}.0"}
    for group, requirement in _project_requirements(pyproject, extras):
        if requirement.marker is not None and not requirement.marker.evaluate({**markers, "extra": ""}):
            continue
        name = canonicalize_name(requirement.name)
        if name not in pins:
            problems.append(
                f"{lock.name}: {requirement} ({pyproject.name}, {group}) is not locked: the image would lack it;"
                f" {REGENERATE}"
            )
        elif not requirement.specifier.contains(pins[name].version, prereleases=True):
            problems.append(
                f"{lock.name}:{pins[name].line}: {name}=={pins[name].version} is outside {pyproject.name}'s"
                f" {requirement} ({group}); move the pin in requirements/ci-constraints.txt or the range, then"
                f" {REGENERATE}"
            )
    return problems


def stack_problems(lock: Path, constraints: Path) -> list[str]:
    """CI's constraints pin the training stack, and every package they pin that the lock has at the same version."""
    pins, _, _ = read_lock(lock)
    constrained = _constraint_pins(constraints)
    problems = [
        f"{constraints.name}: {name} is not pinned: CI would train on whatever is newest, not the image's stack"
        for name in TRAINING_STACK
        if canonicalize_name(name) not in constrained
    ]
    for name, (version, line) in constrained.items():
        if name in pins and not _same_release(version, pins[name].version):
            problems.append(
                f"{constraints.name}:{line}: {name}=={version}, but {lock.name} has {name}=={pins[name].version}:"
                f" CI and the image would train on different stacks; {REGENERATE} after changing the pin"
            )
    return problems


def installed_stack_problems(lock: Path, installed: Mapping[str, str | None]) -> list[str]:
    """The running venv's training stack (name -> installed version, None if missing) is the lock's."""
    pins, _, _ = read_lock(lock)
    problems = []
    for name in TRAINING_STACK:
        pin = pins.get(canonicalize_name(name))
        if pin is None:
            problems.append(f"{lock.name}: {name} is not locked; {REGENERATE}")
            continue
        version = installed.get(name)
        if version is None:
            problems.append(f"{name} is not installed here; the image has {name}=={pin.version}")
        elif not _same_release(Version(version), pin.version):
            problems.append(
                f"{name} {version} is installed here, but {lock.name} has {name}=={pin.version}: reinstall with"
                " -c requirements/ci-constraints.txt"
            )
    return problems


def installed_versions(names: tuple[str, ...] = TRAINING_STACK) -> dict[str, str | None]:
    versions: dict[str, str | None] = {}
    for name in names:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return versions


# --- action.yml -------------------------------------------------------------------------------------------------


def action_image_problems(action: Path, pyproject: Path) -> list[str]:
    """action.yml runs the prebuilt image docker://ghcr.io/rlhf-canary/rlhf-canary:<the package's version>."""
    runs = (yaml.safe_load(action.read_text(encoding="utf-8")) or {}).get("runs") or {}
    image = str(runs.get("image", ""))
    version = _project(pyproject)["version"]
    expected = f"docker://{IMAGE_REPOSITORY}:{version}"
    if runs.get("using") != "docker" or not image.startswith(f"docker://{IMAGE_REPOSITORY}:"):
        return [f"{action.name}: runs.image is {image!r}, not the prebuilt image {expected}"]
    if image != expected:
        return [f"{action.name}: runs.image is {image}, but {pyproject.name} is version {version}: expected {expected}"]
    return []


# --- the Dockerfile ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Instruction:
    keyword: str
    args: str
    line: int
    index: int


@dataclass(frozen=True)
class Copy:
    sources: tuple[str, ...]
    dest: str
    instruction: Instruction


def read_dockerfile(path: Path) -> list[Instruction]:
    """The instructions, continuation lines joined and comments dropped (as Docker reads them)."""
    instructions = []
    for line, text in _logical_lines(path.read_text(encoding="utf-8")):
        keyword, _, args = text.partition(" ")
        instructions.append(Instruction(keyword.upper(), args.strip(), line, len(instructions)))
    return instructions


def copies(instructions: list[Instruction]) -> list[Copy]:
    """COPY/ADD from the build context (COPY --from=<stage> copies from elsewhere and is left out)."""
    found = []
    for ins in instructions:
        if ins.keyword not in {"COPY", "ADD"}:
            continue
        words = json.loads(ins.args) if ins.args.startswith("[") else shlex.split(ins.args)
        if any(word.startswith("--from") for word in words):
            continue
        paths = [word for word in words if not word.startswith("--")]
        found.append(Copy(tuple(paths[:-1]), paths[-1], ins))
    return found


def dockerfile_problems(dockerfile: Path, root: Path) -> list[str]:
    """Base pinned by digest; lock installed with hashes before the package is copied; the entrypoint exists."""
    instructions = read_dockerfile(dockerfile)
    name = dockerfile.name
    problems = []
    for ins in (i for i in instructions if i.keyword == "FROM"):
        image = ins.args.split()[0]
        if not _DIGEST.search(image):
            problems.append(
                f"{name}:{ins.line}: FROM {image} is not pinned by @sha256: digest: a retag changes the image"
            )
    problems += _entrypoint_problems(dockerfile, instructions, root)

    context_copies = copies(instructions)
    lock_copy = next((c for c in context_copies if LOCK_SOURCE in c.sources), None)
    if lock_copy is None:
        return [*problems, f"{name}: {LOCK_SOURCE} is never copied into the image"]
    lock_in_image = _copied_path(lock_copy, LOCK_SOURCE)
    installs = [i for i in instructions if i.keyword == "RUN" and "pip install" in i.args]
    lock_install = next((i for i in installs if _installs_requirements(i.args, lock_in_image)), None)
    if lock_install is None:
        return [*problems, f"{name}: no RUN installs the lock ({lock_in_image}) with pip install -r"]
    for flag, why in (
        ("--require-hashes", "every download checked against the lock"),
        ("--no-deps", "nothing resolved at build time"),
    ):
        if flag not in lock_install.args.split():
            problems.append(f"{name}:{lock_install.line}: the lock is installed without {flag} ({why})")
    for copy in context_copies:
        package_files = [s for s in copy.sources if s.rstrip("/") in {"pyproject.toml", "canary_action"}]
        if package_files and copy.instruction.index < lock_install.index:
            problems.append(
                f"{name}:{copy.instruction.line}: {', '.join(package_files)} is copied before the lock is installed"
                f" (line {lock_install.line}): every change to the package would reinstall the training stack"
            )
    package_installs = [i for i in installs if i is not lock_install and " -r " not in f" {i.args} "]
    if not package_installs:
        problems.append(f"{name}: the package itself is never pip-installed")
    for ins in package_installs:
        if ins.index < lock_install.index:
            problems.append(f"{name}:{ins.line}: the package is installed before the lock (line {lock_install.line})")
        if "--no-deps" not in ins.args.split():
            problems.append(f"{name}:{ins.line}: the package is installed without --no-deps: pip could resolve anew")
    return problems


def package_source_problems(dockerfile: Path, pyproject: Path) -> list[str]:
    """The folders `pip install` builds the package from are all copied next to the copied pyproject.toml."""
    setuptools = tomllib.loads(pyproject.read_text(encoding="utf-8"))["tool"]["setuptools"]
    needed = sorted({"canary_action", *setuptools.get("package-dir", {}).values()})
    instructions = read_dockerfile(dockerfile)
    context_copies = copies(instructions)
    project = next((c for c in context_copies if "pyproject.toml" in c.sources), None)
    if project is None:
        return [f"{dockerfile.name}: pyproject.toml is never copied into the image"]
    source_dir = PurePosixPath(_copied_path(project, "pyproject.toml")).parent
    install = next(
        (i for i in instructions if i.keyword == "RUN" and "pip install" in i.args and str(source_dir) in i.args),
        None,
    )
    problems = []
    for folder in needed:
        wanted = (source_dir / folder).as_posix()
        copy = next(
            (c for c in context_copies if any(s.rstrip("/") == folder for s in c.sources)
             and c.dest.rstrip("/") == wanted),
            None,
        )  # fmt: skip
        if copy is None:
            problems.append(
                f"{dockerfile.name}: {folder}/ is never copied to {wanted}/, so the package built there lacks it "
                f"(pyproject.toml builds the package from it): add COPY {folder}/ {wanted}/"
            )
        elif install is not None and copy.instruction.index > install.index:
            problems.append(
                f"{dockerfile.name}:{copy.instruction.line}: {folder}/ is copied after the package is installed "
                f"(line {install.line})"
            )
    return problems


def image_env_problems(dockerfile: Path) -> list[str]:
    """The Dockerfile tells the fingerprint which image it is (canary_action.fingerprint's variables)."""
    env: dict[str, str] = {}
    for ins in read_dockerfile(dockerfile):
        if ins.keyword == "ENV":
            env.update(_env_pairs(ins.args))
    problems = []
    if not env.get(IMAGE_VAR, "").startswith(f"{IMAGE_REPOSITORY}:"):
        problems.append(
            f"{dockerfile.name}: ENV {IMAGE_VAR}={IMAGE_REPOSITORY}:${{VERSION}} is missing: metrics.json would not"
            " say which image ran"
        )
    if not env.get(IMAGE_REVISION_VAR):
        problems.append(f"{dockerfile.name}: ENV {IMAGE_REVISION_VAR}=${{REVISION}} is missing")
    return problems


def python_problems(dockerfile: Path, lock_script: Path) -> list[str]:
    """The Dockerfile installs the Python the lock was resolved for."""
    match = re.search(r"^python_version=(\S+)$", lock_script.read_text(encoding="utf-8"), re.MULTILINE)
    if match is None:
        return [f"{lock_script.name}: no python_version= line"]
    wanted = match.group(1)
    runs = " ".join(i.args for i in read_dockerfile(dockerfile) if i.keyword == "RUN")
    found = sorted(set(re.findall(r"\bpython(3\.\d+)\b", runs)))
    if found != [wanted]:
        return [
            f"{dockerfile.name} installs Python {', '.join(found) or '(none named)'}, but {lock_script.name} locks for"
            f" Python {wanted}: wheels of the other version would not install"
        ]
    return []


def cuda_problems(dockerfile: Path, lock: Path) -> list[str]:
    """The base image's CUDA major is the one the locked torch's nvidia-*-cu<major> libraries are built for."""
    pins, _, _ = read_lock(lock)
    wheels = {m.group(1) for name in pins if (m := re.fullmatch(r"nvidia-[a-z0-9-]+-cu(\d+)", name))}
    bases = [
        (ins.line, m.group(1))
        for ins in read_dockerfile(dockerfile)
        if ins.keyword == "FROM" and (m := re.match(r"nvidia/cuda:(\d+)\.", ins.args))
    ]
    if len(wheels) != 1:
        return [
            f"{lock.name}: nvidia-*-cu<major> libraries for CUDA {sorted(wheels) or 'none'}: not one CUDA build"
            " of torch"
        ]
    if not bases:
        return [f"{dockerfile.name}: no nvidia/cuda base image"]
    (wanted,) = wheels
    return [
        f"{dockerfile.name}:{line}: the base is CUDA {major}, but the lock's torch is built for CUDA {wanted}"
        f" (nvidia-*-cu{wanted}): the driver check and compat libraries would be for the wrong CUDA"
        for line, major in bases
        if major != wanted
    ]


def context_problems(dockerfile: Path, dockerignore: Path, root: Path) -> list[str]:
    """Every file the Dockerfile copies from the context (`root`) gets through .dockerignore."""
    patterns = read_dockerignore(dockerignore)
    problems = []
    for copy in copies(read_dockerfile(dockerfile)):
        for source in copy.sources:
            paths = [source.rstrip("/")]
            if (root / source).is_dir():
                paths += [
                    p.relative_to(root).as_posix()
                    for p in sorted((root / source).rglob("*"))
                    if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
                ]
            problems += [
                f"{dockerignore.name}: {path} is kept out of the build context, but {dockerfile.name}:"
                f"{copy.instruction.line} copies it"
                for path in paths
                if is_ignored(path, patterns)
            ]
    return problems


def read_dockerignore(path: Path) -> list[tuple[re.Pattern[str], bool]]:
    """(pattern, negated) per line, as Docker reads them: `*` and `?` stay within a folder, `**` crosses them."""
    patterns = []
    for raw in path.read_text(encoding="utf-8").splitlines():
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        negated = text.startswith("!")
        text = text.removeprefix("!").strip().strip("/")
        regex = re.escape(text).replace(r"\*\*/", "(.*/)?").replace(r"\*\*", ".*").replace(r"\*", "[^/]*")
        patterns.append((re.compile(regex.replace(r"\?", "[^/]") + "$"), negated))
    return patterns


def is_ignored(path: str, patterns: list[tuple[re.Pattern[str], bool]]) -> bool:
    """Docker's rule: the last pattern matching the path or one of its parent folders decides."""
    parts = path.split("/")
    candidates = ["/".join(parts[: i + 1]) for i in range(len(parts))]
    ignored = False
    for pattern, negated in patterns:
        if any(pattern.match(candidate) for candidate in candidates):
            ignored = not negated
    return ignored


# --- helpers ----------------------------------------------------------------------------------------------------


def _logical_lines(text: str) -> Iterator[tuple[int, str]]:
    """(first line number, text) with backslash continuations joined; comment and blank lines skipped."""
    parts: list[str] = []
    start = 0
    for number, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not stripped or stripped.startswith("#"):
            continue  # also inside a continuation, as Docker and pip read it
        if not parts:
            start = number
        if stripped.endswith("\\"):
            parts.append(stripped[:-1].strip())
            continue
        parts.append(stripped)
        yield start, " ".join(p for p in parts if p)
        parts = []
    if parts:
        yield start, " ".join(p for p in parts if p)


def _project(pyproject: Path) -> dict[str, Any]:
    project: dict[str, Any] = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    return project


def _project_requirements(pyproject: Path, extras: tuple[str, ...]) -> Iterator[tuple[str, Requirement]]:
    project = _project(pyproject)
    for text in project.get("dependencies", []):
        yield "core", Requirement(text)
    for extra in extras:
        for text in project.get("optional-dependencies", {}).get(extra, []):
            yield f"[{extra}]", Requirement(text)


def _constraint_pins(constraints: Path) -> dict[NormalizedName, tuple[Version, int]]:
    pins = {}
    for line, text in _logical_lines(constraints.read_text(encoding="utf-8")):
        requirement = Requirement(text.split(" #")[0].strip())
        specifiers = list(requirement.specifier)
        if len(specifiers) == 1 and specifiers[0].operator == "==":
            pins[canonicalize_name(requirement.name)] = (Version(specifiers[0].version), line)
    return pins


def _same_release(a: Version, b: Version) -> bool:
    """Equal but for the local label: CI's torch 2.13.0+cpu is the image's torch 2.13.0, built for another device."""
    try:
        return Version(a.public) == Version(b.public)
    except InvalidVersion:
        return False


def _entrypoint_problems(dockerfile: Path, instructions: list[Instruction], root: Path) -> list[str]:
    name = dockerfile.name
    entrypoints = [i for i in instructions if i.keyword == "ENTRYPOINT"]
    if not entrypoints:
        return [f"{name}: no ENTRYPOINT: the Docker action would run nothing"]
    last = entrypoints[-1]
    if not last.args.startswith("["):
        return [f"{name}:{last.line}: ENTRYPOINT is in shell form: signals (a cancelled job) would not reach Python"]
    script = next((word for word in json.loads(last.args) if word.endswith(".py")), None)
    if script is None:
        return [f"{name}:{last.line}: ENTRYPOINT runs no .py file"]
    for copy in reversed(copies(instructions)):
        source = _source_of(copy, script, root)
        if source is None:
            continue
        if not (root / source).is_file():
            return [f"{name}:{last.line}: ENTRYPOINT runs {script}, copied from {source}, which does not exist"]
        return []
    return [f"{name}:{last.line}: ENTRYPOINT runs {script}, which no COPY puts into the image"]


def _source_of(copy: Copy, target: str, root: Path) -> str | None:
    """The context path this COPY puts at `target` in the image, if it does."""
    wanted = PurePosixPath(target)
    for source in copy.sources:
        if (root / source).is_dir():
            dest = PurePosixPath(copy.dest)
            if wanted.is_relative_to(dest) and wanted != dest:
                return (PurePosixPath(source.rstrip("/")) / wanted.relative_to(dest)).as_posix()
        elif PurePosixPath(_copied_path(copy, source)) == wanted:
            return source
    return None


def _copied_path(copy: Copy, source: str) -> str:
    """Where a file source lands: inside dest when dest is a folder (ends with /, or several sources), else dest."""
    if copy.dest.endswith("/") or len(copy.sources) > 1:
        return (PurePosixPath(copy.dest) / PurePosixPath(source).name).as_posix()
    return copy.dest


def _installs_requirements(args: str, path: str) -> bool:
    words = shlex.split(args)
    return any(
        (word in {"-r", "--requirement"} and nxt == path) or word == f"--requirement={path}"
        for word, nxt in zip(words, [*words[1:], ""], strict=True)
    )


def _env_pairs(args: str) -> dict[str, str]:
    words = shlex.split(args)
    if words and "=" not in words[0]:  # the old `ENV KEY value` form
        return {words[0]: " ".join(words[1:])}
    return dict(word.split("=", 1) for word in words if "=" in word)
