#!/usr/bin/env bash
# The main job the README starts with: install, then a real canary end to end on the builtin tiny model,
# offline on the CPU — two runs of configs/tiny/dpo.yaml (a "baseline" and a "pull request"), compared, and
# the comparison rendered as the terminal report and as the PR comment GitHub would show. About a minute after
# the install (docs/benchmarks.md#main-job-timing).
# Exits with `canary compare`'s code: 0 pass/neutral (the expected outcome for two identical configs),
# 1 regression, 2 bad input, 3 a run crashed.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh train  # the CPU build of torch, then the project
out="runs/main-job-$(date -u +%Y%m%dT%H%M%SZ)"
.venv/bin/canary run configs/tiny/dpo.yaml -o "$out/baseline"
.venv/bin/canary run configs/tiny/dpo.yaml -o "$out/current"
verdict=0
.venv/bin/canary compare "$out"/current/*/metrics.json "$out/baseline" --json -o "$out/result.json" || verdict=$?
if [ -f "$out/result.json" ]; then
  .venv/bin/canary report "$out/result.json" --format terminal
  .venv/bin/canary report "$out/result.json" --format comment -o "$out/comment.md"
fi
echo "main job: results in $out (metrics.json of both runs, result.json, comment.md); compare exited $verdict"
exit "$verdict"
