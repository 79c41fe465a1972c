# The runner image of the rlhf-canary Docker action (docs/image.md): a CUDA userland, CPython 3.12, the training
# stack of requirements/image.lock (hash-checked), this package, and the action's entrypoint.
#
#   docker build --build-arg VERSION=1.0.0.dev0 --build-arg REVISION="$(git rev-parse HEAD)" \
#       -t ghcr.io/rlhf-canary/rlhf-canary:1.0.0.dev0 .
#
# CUDA 13.0 because PyPI's torch 2.13.0 Linux x86_64 wheel is built for it (it requires cuda-toolkit 13.0.3 and
# nvidia-cudnn-cu13 9.20). That wheel brings its own CUDA runtime, cuBLAS, cuDNN and NCCL as nvidia-* wheels (in the
# lock), so the base only has to supply what wheels cannot: NVIDIA_REQUIRE_CUDA (the container toolkit refuses a
# host driver that cannot run CUDA 13.0 -- below the 580 branch, bar the data-center branches cuda-compat serves --
# with a clear message instead of a CUDA error mid-run) and those cuda-compat forward-compatibility libraries.
# Hence "-base-", not "-runtime-" or "-cudnn-runtime-": those add apt copies of cuBLAS and cuDNN, gigabytes that
# torch never loads. The cuDNN that runs is the lock's 9.20.
# The digest was not pulled here (no registry access from where this was written): it is the one digest public
# Dockerfiles and GPU validation notes pin for this tag, one of them listing it for amd64 and arm64 (the multi-arch
# index). Confirm it when building: docker buildx imagetools inspect nvidia/cuda:13.0.1-base-ubuntu24.04
FROM nvidia/cuda:13.0.1-base-ubuntu24.04@sha256:f8ef28f579ea42a44b415d2c5d46f788e6a9b395c6c83f2929416e1fc192c143

# Python 3.12: Ubuntu 24.04's own interpreter, so no third-party PPA; torch 2.13 ships cp312 wheels.
# gcc, libc6-dev and python3.12-dev: Triton compiles a small C launcher per kernel at run time (torch_compile: true).
# git: the fingerprint records the workspace's commit. Versions are not pinned (DL3008): the base digest fixes the
# Ubuntu release, and a pinned apt version vanishes from the archive at its next security update, breaking rebuilds.
# safe.directory: the workspace is mounted from the runner, owned by its user, while the action runs as root, and
# git refuses a repository with another owner. canary_action passes `-c safe.directory=*` on its own git calls; this
# covers every other git in the container (a team's pipeline code, `pip install git+…` in a derived image).
# hadolint ignore=DL3008
RUN apt-get update \
    && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
        ca-certificates gcc git libc6-dev python3.12 python3.12-dev python3.12-venv \
    && rm -rf /var/lib/apt/lists/* \
    && git config --system --add safe.directory '*' \
    && python3.12 -m venv /opt/venv

ENV PATH=/opt/venv/bin:$PATH \
    VIRTUAL_ENV=/opt/venv \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

# The training stack first, alone in its layer (several GB): a change to the package below does not reinstall torch.
# --no-deps: the lock is complete, nothing is resolved here; --only-binary: no sdist builds, the hashes are the wheels'.
COPY requirements/image.lock /opt/rlhf-canary/requirements/image.lock
RUN pip install --require-hashes --no-deps --only-binary :all: -r /opt/rlhf-canary/requirements/image.lock

# The package, without deps and without build isolation: it builds with the lock's setuptools, offline, and pip check
# fails the build when the lock does not satisfy the package's ranges.
COPY pyproject.toml README.md /opt/rlhf-canary/src/
COPY canary_action/ /opt/rlhf-canary/src/canary_action/
COPY templates/ /opt/rlhf-canary/src/templates/
RUN pip install --no-deps --no-build-isolation /opt/rlhf-canary/src \
    && rm -rf /opt/rlhf-canary/src/build /opt/rlhf-canary/src/*.egg-info \
    && pip check \
    && canary env

COPY entrypoint/ /opt/rlhf-canary/entrypoint/

# The Hugging Face cache: hub models and datasets. Mount a host folder here to keep downloads between runs (a job-level
# `container:` with `volumes:`); unmounted, it is an anonymous volume that goes with the container.
ENV HF_HOME=/cache/huggingface
VOLUME ["/cache/huggingface"]

# What the NVIDIA Container Toolkit exposes: all GPUs, with the CUDA driver and nvidia-smi/NVML (the base sets the
# same; restated because the action depends on it).
ENV NVIDIA_VISIBLE_DEVICES=all \
    NVIDIA_DRIVER_CAPABILITIES=compute,utility

# Declared last: a new VERSION or REVISION invalidates only the layers from here on, not the training stack.
ARG VERSION=dev
ARG REVISION=unknown
LABEL org.opencontainers.image.title="rlhf-canary" \
      org.opencontainers.image.description="Runner image of the rlhf-canary GitHub Action: CUDA 13, torch 2.13, TRL." \
      org.opencontainers.image.source="https://github.com/rlhf-canary/rlhf-canary" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}"
# Recorded in every metrics.json (environment.container_image, .container_image_revision). The digest is known only
# after the push; a workflow that pins the image by digest can pass it as CANARY_IMAGE_DIGEST.
ENV CANARY_IMAGE=ghcr.io/rlhf-canary/rlhf-canary:${VERSION} \
    CANARY_IMAGE_REVISION=${REVISION}

# No USER: GitHub runs Docker actions as root by design (the workspace and GITHUB_OUTPUT are written as root), and a
# non-root user here would fail to write them.
ENTRYPOINT ["/opt/venv/bin/python", "/opt/rlhf-canary/entrypoint/main.py"]
