#!/usr/bin/env bash
# Regenerate requirements/image.lock: the runner image's training stack, every package pinned with its hashes,
# so the Dockerfile installs it with `pip install --require-hashes --no-deps` and nothing is resolved at build time.
#
# What is locked: the pyproject's core dependencies plus its [train] extra, under the pins of
# requirements/ci-constraints.txt (torch, transformers, trl, ...), so CI and the image run the same stack and the
# two files cannot drift by hand (tests/unit/test_image.py checks that they agree).
# For whom: the image's interpreter and platform, not this machine's: CPython 3.12 (Ubuntu 24.04's python3.12,
# see the Dockerfile) on Linux x86_64 with glibc 2.39 (Ubuntu 24.04), from the public PyPI index, whose Linux
# torch wheel is the CUDA build (its CUDA libraries come as nvidia-* wheels, also locked here).
#
# usage: bash scripts/lock-image.sh [UV-OPTION ...]
#   Unchanged packages keep their pins (the old lock is the starting point); `--upgrade` refreshes all of the
#   unpinned transitive dependencies, `--upgrade-package NAME` one of them.
#   UV: the uv binary (default: .venv/bin/uv; `pip install uv`).
set -euo pipefail
cd "$(dirname "$0")/.."

uv="${UV:-.venv/bin/uv}"
if [[ ! -x "${uv}" ]]; then
    echo "lock-image: ${uv} is missing: .venv/bin/pip install -c requirements/ci-constraints.txt -e '.[dev]'" >&2
    exit 2
fi
lock=requirements/image.lock
# Must equal the Python the Dockerfile installs (tests/unit/test_image.py checks it).
python_version=3.12
platform=x86_64-manylinux_2_39

# The public index only: a machine-local mirror, extra index or wheel folder (UV_* or pip's config, which uv does
# not read) could hold a CPU torch or other hashes than the ones the image will download.
unset UV_INDEX UV_INDEX_URL UV_DEFAULT_INDEX UV_EXTRA_INDEX_URL UV_FIND_LINKS UV_TORCH_BACKEND \
    UV_CONSTRAINT UV_OVERRIDE UV_BUILD_CONSTRAINT UV_EXCLUDE_NEWER UV_PRERELEASE
tmp="$(mktemp)"
trap 'rm -f "${tmp}"' EXIT
[[ -f "${lock}" ]] && cp "${lock}" "${tmp}"

# --no-build: wheels only, so the image build compiles nothing and the hashes are those of the files it installs.
"${uv}" --no-config pip compile pyproject.toml \
    --extra train \
    --constraints requirements/ci-constraints.txt \
    --python-version "${python_version}" \
    --python-platform "${platform}" \
    --index-url https://pypi.org/simple \
    --emit-index-url \
    --no-build \
    --generate-hashes \
    --custom-compile-command "bash scripts/lock-image.sh" \
    --quiet \
    --output-file "${tmp}" \
    "$@"

{
    echo "# The runner image's training stack (see docs/image.md): rlhf-canary's core dependencies and [train] extra,"
    echo "# pinned by requirements/ci-constraints.txt, for CPython ${python_version} on Linux x86_64 (${platform}),"
    echo "# from PyPI (torch is its CUDA build). The Dockerfile installs it with --require-hashes --no-deps."
    echo "# Do not edit: change the pins in requirements/ci-constraints.txt and run bash scripts/lock-image.sh."
    cat "${tmp}"
} >"${lock}"
echo "lock-image: wrote ${lock} ($(grep -c '^[a-z0-9]' "${lock}") packages)"
