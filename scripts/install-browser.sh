#!/usr/bin/env bash
# The browser the history page's tests drive (tests/browser/): Debian's chromium — Playwright's own browser download
# does not reach this project's CI machines — and axe-core, the accessibility checker they run inside it, from npm.
#
# usage: scripts/install-browser.sh   (scripts/install.sh runs it with the dev extra)
#   CANARY_CHROMIUM: a Chromium binary to use instead (then nothing is installed for it)
# A step it cannot take (no root for apt-get, no npm) is said, not fatal: the browser tests then skip, except under
# CI=true, where they fail (tests/browser/conftest.py).
set -uo pipefail
cd "$(dirname "$0")/.."
axe_version="4.14.1" # the rules the tests hold the page to: bump deliberately
axe_dir=".cache/axe-core-${axe_version}"

if [[ -z "${CANARY_CHROMIUM:-}" ]] && ! command -v chromium >/dev/null; then
    if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
        echo "install-browser: Debian's chromium (apt-get)" >&2
        export DEBIAN_FRONTEND=noninteractive
        apt-get install -y -q chromium >/dev/null ||
            { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; } ||
            echo "install-browser: apt-get could not install chromium: tests/browser will skip (fail under CI)" >&2
    else
        echo "install-browser: no chromium, and no root apt-get to install it: install it (apt-get install" \
            "chromium) or set CANARY_CHROMIUM for tests/browser" >&2
    fi
fi

if [[ ! -f "${axe_dir}/axe.min.js" ]]; then
    if command -v npm >/dev/null; then
        rm -rf "${axe_dir}" && mkdir -p "${axe_dir}" &&
            npm pack --silent --pack-destination "${axe_dir}" "axe-core@${axe_version}" >/dev/null &&
            tar -xzf "${axe_dir}/axe-core-${axe_version}.tgz" -C "${axe_dir}" --strip-components=1 package/axe.min.js package/LICENSE &&
            rm "${axe_dir}/axe-core-${axe_version}.tgz" ||
            echo "install-browser: npm could not fetch axe-core ${axe_version}: the accessibility test will skip" >&2
    else
        echo "install-browser: no npm to fetch axe-core ${axe_version}: the accessibility test will skip" >&2
    fi
fi
