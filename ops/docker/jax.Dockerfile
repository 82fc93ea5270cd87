# NVIDIA GPU image for the JAX/Flax expert (`ddm worker expert --device gpu`).
#   docker build -f ops/docker/jax.Dockerfile -t ddm-pipeline:jax-cuda .   (context: the repository root)
# jax[cuda12] brings CUDA 12 and cuDNN as pip wheels; the host needs the NVIDIA driver and the NVIDIA
# Container Toolkit. torch is a dependency of the package (the CPU build is enough here). Not built or
# run here (no Docker engine and no GPU on the development machines).

FROM python:3.11-slim-bookworm AS source
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY . /src
RUN pip wheel --no-deps --wheel-dir /wheels /src \
 && mkdir -p /ckpt \
 && if [ -d /src/checkpoints ]; then cp -a /src/checkpoints/. /ckpt/; \
    else echo "note: no checkpoints/ in the build context; mount a deployment and set DDM_DEPLOYMENT"; fi

FROM python:3.11-slim-bookworm
ARG TORCH_SPEC="torch==2.13.0"
ARG JAX_SPEC="jax[cuda12]==0.10.2"
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    XLA_PYTHON_CLIENT_PREALLOCATE=false
RUN pip install --index-url https://download.pytorch.org/whl/cpu "${TORCH_SPEC}" \
 && pip install "${JAX_SPEC}"
COPY --from=source /wheels /wheels
RUN pip install /wheels/*.whl && rm -rf /wheels \
 && useradd --create-home --uid 10001 ddm
COPY --from=source --chown=ddm /ckpt /srv/ddm/checkpoints
WORKDIR /srv/ddm
ENV DDM_DEPLOYMENT=/srv/ddm/checkpoints/mnist/deployment.toml
USER ddm
CMD ["ddm", "--help"]
