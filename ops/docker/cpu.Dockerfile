# CPU image: the router, the web UI, and the PyTorch and JAX experts on CPU.
#   docker build -f ops/docker/cpu.Dockerfile -t ddm-pipeline:cpu .      (context: the repository root)
# Not built on the development machines (no Docker engine there); docker-compose.yml builds it.

# ---- stage 1: the package as a wheel, and the shipped checkpoints (if the context has them)
FROM python:3.11-slim-bookworm AS source
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY . /src
RUN pip wheel --no-deps --wheel-dir /wheels /src \
 && mkdir -p /ckpt \
 && if [ -d /src/checkpoints ]; then cp -a /src/checkpoints/. /ckpt/; \
    else echo "note: no checkpoints/ in the build context; mount a deployment and set DDM_DEPLOYMENT"; fi

# ---- stage 2: runtime
FROM python:3.11-slim-bookworm
ARG TORCH_SPEC="torch==2.13.0"
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
# The CPU build of torch from PyTorch's own index: the default PyPI wheel brings the CUDA libraries (GBs).
# Its own layer, so a source change does not reinstall it.
RUN pip install --index-url https://download.pytorch.org/whl/cpu "${TORCH_SPEC}"
COPY --from=source /wheels /wheels
RUN pip install /wheels/*.whl && rm -rf /wheels \
 && useradd --create-home --uid 10001 ddm
COPY --from=source --chown=ddm /ckpt /srv/ddm/checkpoints
# Not the source tree: run from a folder without a ddm/ package in it (python -m must find the installed one).
WORKDIR /srv/ddm
ENV DDM_DEPLOYMENT=/srv/ddm/checkpoints/mnist/deployment.toml
USER ddm
CMD ["ddm", "--help"]
