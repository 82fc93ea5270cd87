# NVIDIA GPU image for the PyTorch expert (`ddm worker expert --device cuda`).
#   docker build -f ops/docker/cuda.Dockerfile -t ddm-pipeline:cuda .     (context: the repository root)
# The PyPI torch wheel for Linux x86_64 is the CUDA build and carries its CUDA libraries, so a slim base
# is enough; the host needs the NVIDIA driver and the NVIDIA Container Toolkit. Not built or run here
# (no Docker engine and no GPU on the development machines). Versions: constraints.txt.

FROM python:3.11-slim-bookworm AS source
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY . /src
RUN pip wheel --no-deps --wheel-dir /wheels /src \
 && mkdir -p /ckpt \
 && if [ -d /src/checkpoints ]; then cp -a /src/checkpoints/. /ckpt/; \
    else echo "note: no checkpoints/ in the build context; mount a deployment and set DDM_DEPLOYMENT"; fi

FROM python:3.11-slim-bookworm
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY constraints.txt /etc/ddm/constraints.txt
RUN pip install -c /etc/ddm/constraints.txt torch
COPY --from=source /wheels /wheels
RUN pip install -c /etc/ddm/constraints.txt "$(echo /wheels/ddm_pipeline-*.whl)[torch]" \
 && rm -rf /wheels \
 && useradd --create-home --uid 10001 ddm
COPY --from=source --chown=ddm /ckpt /srv/ddm/checkpoints
WORKDIR /srv/ddm
ENV DDM_DEPLOYMENT=/srv/ddm/checkpoints/mnist/deployment.toml
USER ddm
CMD ["ddm", "--help"]
