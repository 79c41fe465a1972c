#!/usr/bin/env bash
# Make the project's virtual environment: the CPU build of torch first, then the project with its extras, every
# version pinned by requirements/ci-constraints.txt.
#
# usage: scripts/install.sh [EXTRAS]        (default: train,dev; the main job uses train; dev also installs the
#                                           browser of tests/browser: scripts/install-browser.sh)
#   VENV: the environment's folder (default: .venv; made when it has no pip yet)
#   CANARY_TORCH_INDEX: where the CPU build comes from when no wheel is at hand
#                       (default: https://download.pytorch.org/whl/cpu)
#
# Why torch first: PyPI's torch 2.13.0 for Linux x86_64 is the CUDA build, several GB. The CPU build is taken
# from a wheel pip finds without an index (a wheel folder in pip's find-links, as on this project's CI machines),
# else from PyTorch's CPU index. A torch 2.13.0 already installed (a CUDA build on a GPU machine) is kept: the
# constraint `torch==2.13.0` is met by any build of that version, so the second step installs no other torch.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-train,dev}"
venv="${VENV:-.venv}"
torch_pin="$(grep -E '^torch==' requirements/ci-constraints.txt)"
[[ -x "${venv}/bin/pip" ]] || python3 -m venv "${venv}"
if ! "${venv}/bin/pip" install -q --no-index --no-deps "${torch_pin}" 2>/dev/null; then
    echo "install: no ${torch_pin} wheel at hand: its CPU build from ${CANARY_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}" >&2
    "${venv}/bin/pip" install -q --no-deps --index-url "${CANARY_TORCH_INDEX:-https://download.pytorch.org/whl/cpu}" "${torch_pin}"
fi
"${venv}/bin/pip" install -q -c requirements/ci-constraints.txt -e ".[${extras}]"
if [[ ",${extras}," == *",dev,"* ]]; then
    bash scripts/install-browser.sh # the history page's browser tests (tests/browser/)
fi
