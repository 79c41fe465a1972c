#!/usr/bin/env bash
# Every GPU check of rlhf-canary in one call, for whenever a GPU is at hand (scripts/gpu_check.py lists them and
# prints the table; figures go to docs/benchmarks.md#gpu-check with the device):
#
#   bash scripts/gpu-check.sh [-o DIR] [--cpu]
#
# From a clean machine that has a CUDA build of torch: what the stack lacks (trl, datasets, pydantic...) is
# installed from wheels carried in .whl/ when there are any (a machine with no network; the device tool's README
# says how to fetch them), else from the package index at the versions pyproject.toml allows, keeping the
# installed torch. The checkout goes on the interpreter's path through a .pth file, not PYTHONPATH: a lockstep
# pair's sides run with a scrubbed environment. --cpu runs the same path on the CPU (tiny configs, few steps).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-python3}
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1

if ! "$python" -c "import trl, datasets, pydantic, click, jinja2, canary_action" 2>/dev/null; then
  site=$("$python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  # The .pth files are removed when the check ends: the interpreter is left as it was found.
  trap 'rm -f "$site/rlhf-canary-wheels.pth" "$site/rlhf-canary-checkout.pth"' EXIT
  if compgen -G ".whl/*.whl" >/dev/null; then
    wheels=$(mktemp -d)  # a fresh folder: no other user's files on the import path
    "$python" -m pip install -q --no-index --no-deps --no-compile --upgrade --target "$wheels" .whl/*.whl
    echo "$wheels" >"$site/rlhf-canary-wheels.pth"
  else
    torch_version=$("$python" -c "import torch; print(torch.__version__)")
    "$python" -m pip install -q -e ".[train]" "torch==${torch_version}"
  fi
  echo "$PWD" >"$site/rlhf-canary-checkout.pth"
fi

"$python" scripts/gpu_check.py "$@"
