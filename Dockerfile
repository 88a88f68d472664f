# Home Assistant add-on image, also usable on its own:
#   docker build -t wyoming-pocket-tts .
#   docker run -p 10200:10200 -v pocket-tts-data:/data -v "$PWD/pocket_tts:/share/pocket_tts" wyoming-pocket-tts
#
# Supervisor (2026.04 and later) builds this file with `docker buildx build --platform`
# and passes no BUILD_FROM, so the default below must be right for every architecture
# in config.yaml: base-debian is a multi-arch manifest (amd64 + aarch64), resolved per
# platform. Debian (glibc) rather than Alpine because torch ships manylinux wheels only.
ARG BUILD_FROM=ghcr.io/home-assistant/base-debian:trixie

# Two stages: the source is copied and installed in "build", and only the installed venv
# reaches the image (a COPY of the source stays in its layer even when a later RUN
# deletes it). Plain multi-stage, so any builder takes it (no BuildKit-only syntax).
FROM ${BUILD_FROM} AS runtime

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

ENV LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive \
    VIRTUAL_ENV=/opt/venv \
    PATH="/opt/venv/bin:${PATH}" \
    PYTHONUNBUFFERED=1 \
    HF_HOME=/data/huggingface \
    HF_HUB_DISABLE_TELEMETRY=1

# Debian's python3 (3.13 on trixie); versions follow the base image's release. apt's
# caches go too: base-debian removes apt's docker-clean hook, so without `apt-get clean`
# its downloaded packages (~94 MB) stay in this layer.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates \
        python3 \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/*


FROM runtime AS build

# A C compiler for the batched-step kernel (setup.py); it stays in this stage, only the
# built library reaches the image.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends python3-venv gcc libc6-dev \
    && apt-get clean \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv "${VIRTUAL_ENV}"

# The same script as the README and CI, which takes torch's CPU build by itself (from
# PyTorch's CPU index on amd64 and aarch64), and the same pins (constraints.txt). Set
# TORCH_INDEX_URL only to take torch from another index (a mirror), as script/setup says.
ARG TORCH_INDEX_URL=
# pip's own settings, for a builder behind a mirror or a proxy: `docker build
# --build-arg PIP_INDEX_URL=https://mirror/simple` (PIP_TRUSTED_HOST for a proxy that
# intercepts TLS). Docker's HTTPS_PROXY and friends are passed without a declaration.
# Unset unless given. A password in an index URL shows in `docker history` of this stage.
ARG PIP_INDEX_URL
ARG PIP_EXTRA_INDEX_URL
ARG PIP_TRUSTED_HOST
ARG PIP_DEFAULT_TIMEOUT
ARG PIP_RETRIES
# The check after the install imports torch where the build runs natively (x86_64): an
# aarch64 build emulated by qemu on x86 crashes in torch's import (oneDNN's CPU probe
# finds no MIDR_EL1, exit 139), so elsewhere the installed packages are checked from
# their metadata only. 1 or 0 decides.
ARG IMPORT_TORCH_CHECK=auto
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /usr/src/wyoming-pocket-tts
COPY pyproject.toml setup.py README.md constraints.txt ./
COPY native native
COPY script/setup script/setup
COPY wyoming_pocket_tts wyoming_pocket_tts
# The venv's python3 comes first on PATH, so script/setup installs into the venv.
# Whole torch, nothing pruned: deleting parts of it breaks its import.
RUN script/setup

# The checks: a RUN of their own (only the venv leaves this stage, so it costs the image
# nothing), and a check that fails does not throw away the install above. With -P they
# see the installed package, not the source folder. pip check's complaint that a wheel's
# platform "is not supported" is not a broken requirement: it flags aarch64 CUDA packages
# (TORCH_INDEX_URL=default) built under qemu; only broken requirements fail the build.
RUN { python3 -m pip check || true; } | tee /tmp/pip-check \
    && ! grep -v -e "^No broken requirements found" -e " is not supported on this platform$" /tmp/pip-check \
    && python3 -P -m wyoming_pocket_tts --version \
    && python3 -P -c "import importlib.metadata as m; print('torch', m.version('torch'), 'installed')" \
    && if [[ "${IMPORT_TORCH_CHECK}" == 1 || ("${IMPORT_TORCH_CHECK}" == auto && "$(uname -m)" == x86_64) ]]; then \
        python3 -P -c "import torch; print('torch', torch.__version__, 'imports')"; \
    fi

FROM runtime

COPY --from=build /opt/venv /opt/venv
COPY addon /opt/addon

EXPOSE 10200/tcp

# A real describe -> info round trip, not a port check. The server answers describe
# while the model downloads, but allow a slow first start all the same.
HEALTHCHECK --start-period=15m --interval=30s --timeout=10s --retries=3 \
    CMD ["/opt/venv/bin/python3", "/opt/addon/healthcheck.py"]

# Replaces the base image's S6 /init (config.yaml has init: false): run.py is PID 1,
# forwards stop signals to the server and registers discovery.
ENTRYPOINT ["/opt/venv/bin/python3", "/opt/addon/run.py"]
CMD []

LABEL org.opencontainers.image.title="Pocket TTS" \
      org.opencontainers.image.description="Wyoming text to speech server with Kyutai's Pocket TTS (CPU)" \
      org.opencontainers.image.source="https://github.com/wyoming-pocket-tts/wyoming-pocket-tts" \
      org.opencontainers.image.licenses="MIT"
