#!/usr/bin/env bash
# Build the runner image of the Docker action and push it to your registry, in one command, before a release exists
# (docs/adopt.md#what-is-released, docs/image.md). Prints the digest and the `image:` line for your copy of action.yml.
#
# usage: bash scripts/build-image.sh REGISTRY/NAME [--no-push]
#   e.g. bash scripts/build-image.sh ghcr.io/your-org/rlhf-canary
#   The tag is pyproject.toml's version; the labels carry this checkout's commit. Log in first (docker login ghcr.io).
#   --no-push: build and tag only.
#   DOCKER: the docker binary (default: docker on PATH).
set -euo pipefail
cd "$(dirname "$0")/.."

if (($# < 1)) || [[ "$1" == -* ]]; then
    echo "usage: bash scripts/build-image.sh REGISTRY/NAME [--no-push]   (e.g. ghcr.io/your-org/rlhf-canary)" >&2
    exit 2
fi
name="$1"
push=1
if [[ "${2:-}" == "--no-push" ]]; then
    push=0
elif (($# > 1)); then
    echo "build-image: unknown option ${2}; the only one is --no-push" >&2
    exit 2
fi
if [[ "${name}" != */* || "${name##*/}" == *:* || "${name}" == *@* ]]; then
    echo "build-image: ${name} is not REGISTRY/NAME without a tag or digest (the tag is the package's version)" >&2
    exit 2
fi
docker="${DOCKER:-docker}"
if ! command -v "${docker}" >/dev/null; then
    echo "build-image: ${docker} is not installed here: build on a machine with Docker (the GPU runner will do)" >&2
    exit 2
fi
version="$(sed -n 's/^version = "\(.*\)"$/\1/p' pyproject.toml | head -n 1)"
revision="$(git rev-parse HEAD 2>/dev/null || echo unknown)"
tag="${name}:${version}"

"${docker}" build --build-arg VERSION="${version}" --build-arg REVISION="${revision}" -t "${tag}" .
if ((push == 0)); then
    echo "built ${tag} (not pushed)"
    exit 0
fi
"${docker}" push "${tag}"
digest="$("${docker}" inspect --format '{{index .RepoDigests 0}}' "${tag}")"
echo "pushed ${tag}: ${digest}"
echo "in your copy of action.yml:  image: docker://${digest}"
