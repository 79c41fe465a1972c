#!/usr/bin/env bash
# Regenerate requirements/report.lock: the light dependencies of the report-only action (report/action.yml), every
# package pinned with the hashes of the wheels a GitHub-hosted runner installs, so that the job holding the write
# token installs them with `pip install --require-hashes --only-binary :all: --no-deps` and resolves nothing.
#
# What is locked: pyproject.toml's core dependencies (pydantic, PyYAML, jinja2, click) and theirs; not the [train]
# extra (report mode imports no torch), not rlhf-canary itself (the action runs it from its own checkout).
# For whom: CPython 3.12 (the Python report/action.yml sets up) on GitHub's hosted Ubuntu runners: 22.04 (glibc
# 2.35) and 24.04 (glibc 2.39), x86_64 and arm64. For each of the four, pip picks the wheel that runner's pip would
# pick (the same platform tags, most specific first) and the lock lists its sha256, with the file's name beside it
# (tests/unit/test_report_action.py reads those names). Pure-Python packages have one py3-none-any wheel for all.
#
# usage: bash scripts/lock-report.sh [UV-OPTION ...]
#   Unchanged packages keep their pins (the old lock is the starting point); `--upgrade` refreshes every pin,
#   `--upgrade-package NAME` one of them.
#   UV: the uv binary (default: .venv/bin/uv); PYTHON: a Python with pip and packaging (default: .venv/bin/python).
set -euo pipefail
cd "$(dirname "$0")/.."

uv="${UV:-.venv/bin/uv}"
python="${PYTHON:-.venv/bin/python}"
for tool in "${uv}" "${python}"; do
    if [[ ! -x "${tool}" ]]; then
        echo "lock-report: ${tool} is missing: .venv/bin/pip install -c requirements/ci-constraints.txt -e '.[dev]'" >&2
        exit 2
    fi
done
lock=requirements/report.lock
index=https://pypi.org/simple
# Must equal the python-version report/action.yml sets up (tests/unit/test_report_action.py checks it).
python_version=3.12
# The hosted runners' glibc: ubuntu-22.04 and ubuntu-24.04 (ubuntu-latest).
glibcs=(35 39)
arches=(x86_64 aarch64)

# The public index only, as for the image's lock: a local mirror or wheel folder could hold other files.
unset UV_INDEX UV_INDEX_URL UV_DEFAULT_INDEX UV_EXTRA_INDEX_URL UV_FIND_LINKS UV_CONSTRAINT UV_OVERRIDE \
    UV_BUILD_CONSTRAINT UV_EXCLUDE_NEWER UV_PRERELEASE
tmp="$(mktemp -d)"
trap 'rm -rf "${tmp}"' EXIT

# 1. Resolve once per architecture (the old lock's pins preferred); the pins must not depend on it.
for arch in "${arches[@]}"; do
    pins="${tmp}/pins-${arch}.txt"
    [[ -f "${lock}" ]] && cp "${lock}" "${pins}"
    # --no-build: a package with no wheel fails here, not in the action's job.
    "${uv}" --no-config pip compile pyproject.toml \
        --python-version "${python_version}" \
        --python-platform "${arch}-manylinux_2_${glibcs[0]}" \
        --index-url "${index}" \
        --no-build \
        --no-header \
        --no-annotate \
        --quiet \
        --output-file "${pins}" \
        "$@"
done
if ! cmp -s "${tmp}/pins-${arches[0]}.txt" "${tmp}/pins-${arches[1]}.txt"; then
    echo "lock-report: the pins differ between ${arches[*]}; one lock cannot serve both:" >&2
    diff "${tmp}/pins-${arches[0]}.txt" "${tmp}/pins-${arches[1]}.txt" >&2 || true
    exit 1
fi

# 2. Download, per runner, the wheel its pip would choose. pip's platform tags, most specific first, as
#    packaging's _manylinux.platform_tags yields them on that glibc (with the legacy aliases after their versions).
platforms() {
    local arch="$1" glibc="$2" minor
    local oldest=5
    [[ "${arch}" == aarch64 ]] && oldest=17
    for ((minor = glibc; minor >= oldest; minor--)); do
        printf -- '--platform\nmanylinux_2_%s_%s\n' "${minor}" "${arch}"
        case "${minor}:${arch}" in
            17:*) printf -- '--platform\nmanylinux2014_%s\n' "${arch}" ;;
            12:x86_64) printf -- '--platform\nmanylinux2010_%s\n' "${arch}" ;;
            5:x86_64) printf -- '--platform\nmanylinux1_%s\n' "${arch}" ;;
        esac
    done
}
for arch in "${arches[@]}"; do
    for glibc in "${glibcs[@]}"; do
        mapfile -t platform_args < <(platforms "${arch}" "${glibc}")
        # --isolated: no PIP_* variables or pip.conf (another index, a wheel folder).
        "${python}" -m pip --isolated --disable-pip-version-check download \
            --quiet \
            --no-deps \
            --only-binary :all: \
            --implementation cp \
            --python-version "${python_version}" \
            "${platform_args[@]}" \
            --index-url "${index}" \
            --dest "${tmp}/wheels" \
            --requirement "${tmp}/pins-${arch}.txt"
    done
done

# 3. Write the lock: each pin with the sha256 of every wheel downloaded for it, and that wheel's name.
"${python}" - "${tmp}/pins-${arches[0]}.txt" "${tmp}/wheels" "${lock}" "${index}" "${python_version}" <<'PYTHON'
import hashlib
import sys
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name, parse_wheel_filename

pins_file, wheels, lock, index, python_version = sys.argv[1:]
pins = {}
for line in Path(pins_file).read_text(encoding="utf-8").splitlines():
    if line.strip() and not line.startswith(("#", "-")):
        requirement = Requirement(line)
        pins[canonicalize_name(requirement.name)] = str(requirement.specifier).removeprefix("==")
files = {}
for wheel in sorted(Path(wheels).glob("*.whl")):
    name, version, _, _ = parse_wheel_filename(wheel.name)
    if name not in pins or str(version) != pins[name]:
        sys.exit(f"lock-report: downloaded {wheel.name}, which is not a pin of {pins_file}")
    files.setdefault(name, []).append((hashlib.sha256(wheel.read_bytes()).hexdigest(), wheel.name))
missing = sorted(set(pins) - set(files))
if missing:
    sys.exit(f"lock-report: no wheel was downloaded for {', '.join(missing)}")
out = [
    "# The report-only action's dependencies (report/action.yml): rlhf-canary's core dependencies, without the",
    f"# [train] extra, for CPython {python_version} on GitHub-hosted Ubuntu runners (glibc 2.35 and 2.39; x86_64,",
    "# aarch64), wheels only, from PyPI. report/action.yml installs it with --require-hashes --only-binary :all:",
    "# --no-deps. Do not edit: run bash scripts/lock-report.sh (--upgrade to refresh the pins).",
    f"--index-url {index}",
    "",
]
for name in sorted(pins):
    hashed = sorted(files[name])
    out.append(f"{name}=={pins[name]} \\")
    out.extend(f"    --hash=sha256:{digest}" + (" \\" if i < len(hashed) - 1 else "") for i, (digest, _) in enumerate(hashed))
    out.extend(f"    # {digest[:12]} {filename}" for digest, filename in hashed)
Path(lock).write_text("\n".join(out) + "\n", encoding="utf-8")
PYTHON
echo "lock-report: wrote ${lock} ($(grep -c '^[a-z0-9]' "${lock}") packages, $(grep -c -- '--hash=' "${lock}") wheels)"
