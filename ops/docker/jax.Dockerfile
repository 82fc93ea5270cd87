# NVIDIA GPU image for the JAX/Flax expert (`ddm worker expert --device gpu`).
#   docker build -f ops/docker/jax.Dockerfile -t ddm-pipeline:jax-cuda .   (context: the repository root)
# jax[cuda12] brings CUDA 12 and cuDNN as pip wheels (jax and jaxlib at the versions in constraints.txt);
# the host needs the NVIDIA driver and the NVIDIA Container Toolkit. The jax extra alone: no torch.
# Not built or run here (no Docker engine and no GPU on the development machines).

FROM python:3.11-slim-bookworm AS source
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY . /src
RUN pip wheel --no-deps --wheel-dir /wheels /src \
 && mkdir -p /ckpt \
 && if [ -d /src/checkpoints ]; then cp -a /src/checkpoints/. /ckpt/; \
    else echo "note: no checkpoints/ in the build context; mount a deployment and set DDM_DEPLOYMENT"; fi

FROM python:3.11-slim-bookworm
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    XLA_PYTHON_CLIENT_PREALLOCATE=false
COPY constraints.txt /etc/ddm/constraints.txt
RUN pip install -c /etc/ddm/constraints.txt "jax[cuda12]"
COPY --from=source /wheels /wheels
RUN pip install -c /etc/ddm/constraints.txt "$(echo /wheels/ddm_pipeline-*.whl)[jax]" \
 && rm -rf /wheels \
 && useradd --create-home --uid 10001 ddm \
 && mkdir -p /var/cache/ddm/jax && chown ddm /var/cache/ddm/jax
COPY --from=source --chown=ddm /ckpt /srv/ddm/checkpoints
WORKDIR /srv/ddm
# The JAX compile cache: a volume in docker-compose.yml, so a restarted expert loads its buckets compiled.
ENV DDM_DEPLOYMENT=/srv/ddm/checkpoints/mnist/deployment.toml DDM_JAX_CACHE_DIR=/var/cache/ddm/jax
USER ddm
CMD ["ddm", "--help"]
