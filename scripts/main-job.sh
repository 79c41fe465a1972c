#!/usr/bin/env bash
# The main job the README starts with: install, then the gate end to end on the builtin tiny model, offline on
# the CPU, both ways it can go:
#   1. A/A: configs/tiny/dpo.yaml run twice (a "baseline" and a "pull request" that changes nothing), compared,
#      and the comparison rendered as the terminal report and as the PR comment GitHub would show: the gate
#      must stay quiet (pass).
#   2. A/B: a lockstep pair (`canary pair`, the action's default for pull requests) of that config and a "pull
#      request" that plants a 0.3 s wait in every step (fault_injection.sleep_s_per_step: +131 % on the quiet
#      2-core dev machine, +81 % beside two CPU-bound loops, 2026-11-28): the gate must catch it (regression),
#      confirmed by a second pair of fresh processes (docs/lockstep.md), and report the training math identical
#      (a wait changes no number).
#   3. Correctness: a pair whose "pull request" sets DPO's beta ten times too large: its own loss falls as fast,
#      but its model prefers the chosen answers far less on held-out pairs the canary scores itself: the gate must
#      fail it on heldout_eval, and say that the training math changed from step 1.
# A few minutes after the install (docs/benchmarks.md#main-job-timing).
# Exits 0 when the gate did all three, 1 when it did not (it says which), 2 or 3 when a command failed (bad input, a
# crashed run), with that command's code.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh train # the CPU build of torch, then the project
out="runs/main-job-$(date -u +%Y%m%dT%H%M%SZ)"
canary=.venv/bin/canary

echo "== 1. A/A: the same config twice; the gate must pass it"
"$canary" run configs/tiny/dpo.yaml -o "$out/baseline"
"$canary" run configs/tiny/dpo.yaml -o "$out/current"
same=0
"$canary" compare "$out"/current/*/metrics.json "$out/baseline" --json -o "$out/result.json" || same=$?
if [ -f "$out/result.json" ]; then
  "$canary" report "$out/result.json" --format terminal
  "$canary" report "$out/result.json" --format comment -o "$out/comment.md"
fi

echo "== 2. A/B: a lockstep pair whose head waits 0.3 s more every step; the gate must catch it"
mkdir -p "$out/trees/base" "$out/trees/head"
cp configs/tiny/dpo.yaml "$out/trees/base/canary.yaml"
cp configs/tiny/dpo.yaml "$out/trees/head/canary.yaml"
printf 'fault_injection:\n  sleep_s_per_step: 0.3  # the planted regression\n' >>"$out/trees/head/canary.yaml"
slowed=0
"$canary" pair canary.yaml --base "$out/trees/base" --head "$out/trees/head" -o "$out/pair" || slowed=$?

confirmed=$("$(dirname "$canary")/python" -c 'import json, pathlib, sys
[result] = pathlib.Path(sys.argv[1]).glob("*/result.json")
step = next(c for c in json.loads(result.read_text())["checks"] if c["name"] == "step_time")
print("confirmed" if "confirmed by a second pair" in step["message"] else "unconfirmed")' "$out/pair" 2>/dev/null ||
  echo "unread")
echo "step_time: $confirmed"

echo "== 3. correctness: a pair whose head sets beta ten times too large; the gate must fail it on held-out data"
mkdir -p "$out/trees/beta"
sed 's/^beta: 0.1$/beta: 1.0  # the planted slip: ten times too large/' configs/tiny/dpo.yaml >"$out/trees/beta/canary.yaml"
slipped=0
"$canary" pair canary.yaml --base "$out/trees/base" --head "$out/trees/beta" -o "$out/slip" --json \
  >"$out/slip.json" || slipped=$?
caught=$("$(dirname "$canary")/python" -c 'import json, sys
result = json.load(open(sys.argv[1]))
print(next(c["status"] for c in result["checks"] if c["name"] == "heldout_eval"), result["reason"][:300])' \
  "$out/slip.json" 2>/dev/null || echo "unread")
echo "heldout_eval: $caught"

echo "main job: results in $out (A/A: both runs' metrics.json, result.json, comment.md; A/B: pair/; slip: slip/)"
if [ "$same" -ge 2 ] || [ "$slowed" -ge 2 ] || [ "$slipped" -ge 2 ]; then
  echo "main job: a command failed (A/A compare exited $same, the pairs $slowed and $slipped): see above" >&2
  exit $((same >= 2 ? same : slowed >= 2 ? slowed : slipped))
fi
if [ "$same" -eq 0 ] && [ "$slowed" -eq 1 ] && [ "$confirmed" = "confirmed" ] && [ "$slipped" -eq 1 ] &&
  [ "${caught%% *}" = "fail" ]; then
  echo "main job: the gate passed the unchanged pull request, caught the planted slowdown and the correctness slip"
  exit 0
fi
echo "main job: expected pass, a confirmed regression, regression on held-out data; got exit $same (A/A)," \
  "$slowed (A/B: step_time $confirmed), $slipped (slip: heldout_eval ${caught%% *})" >&2
exit 1
