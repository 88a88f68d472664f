# Home Assistant add-on image, also usable on its own:
#   docker build -t wyoming-pocket-tts .
#   docker run -p 10200:10200 -v pocket-tts-data:/data -v "$PWD/pocket_tts:/share/pocket_tts" wyoming-pocket-tts
#
# Supervisor (2026.04 and later) builds this file with `docker buildx build --platform`
# and passes no BUILD_FROM, so the default below must be right for every architecture
# in config.yaml: base-debian is a multi-arch manifest (amd64 + aarch64), resolved per
# platform. Debian (glibc) rather than Alpine because torch ships manylinux wheels only.
ARG BUILD_FROM=ghcr.io/home-assistant/base-debian:trixie
FROM ${BUILD_FROM}

SHELL ["/bin/bash", "-o", "pipefail", "-c"]

# The same script as the README and CI, which takes torch's CPU build by itself (from
# PyTorch's CPU index on amd64 and aarch64). Set this build argument only to take torch
# from another index (a mirror), as script/setup describes.
ARG TORCH_INDEX_URL=

ENV LANG=C.UTF-8 \
    DEBIAN_FRONTEND=noninteractive \
    VIRTUAL_ENV=/opt/venv \
    PATH="/opt/venv/bin:${PATH}" \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONUNBUFFERED=1 \
    HF_HOME=/data/huggingface \
    HF_HUB_DISABLE_TELEMETRY=1

# Debian's python3 (3.13 on trixie); versions follow the base image's release.
# hadolint ignore=DL3008
RUN apt-get update \
    && apt-get install -y --no-install-recommends \
        ca-certificates \
        python3 \
        python3-venv \
    && rm -rf /var/lib/apt/lists/* \
    && python3 -m venv "${VIRTUAL_ENV}"

WORKDIR /usr/src/wyoming-pocket-tts
COPY pyproject.toml README.md ./
COPY script/setup script/setup
COPY wyoming_pocket_tts wyoming_pocket_tts
# The venv's python3 comes first on PATH, so script/setup installs into the venv.
# Whole torch, nothing pruned: deleting parts of it breaks its import. The import
# check runs with -P so that it sees the installed package, not the source folder.
RUN script/setup \
    && python3 -P -c "import torch, wyoming_pocket_tts; print('torch', torch.__version__)" \
    && rm -rf /usr/src/wyoming-pocket-tts

WORKDIR /
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
