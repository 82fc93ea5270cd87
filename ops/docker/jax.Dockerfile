# NVIDIA GPU image for the JAX/Flax expert (`ddm worker expert --device gpu`).
#   docker build -f ops/docker/jax.Dockerfile -t ddm-pipeline:jax-cuda .   (context: the repository root)
# NOT BUILT OR RUN HERE: the development machines have no Docker engine and no GPU.
#
# One pinned stack: jax, jaxlib, the CUDA plugin, flax and optax move together or not at all. jax[cuda12]
# pulls jax-cuda12-plugin and jax-cuda12-pjrt at exactly jax's version, and CUDA 12 and cuDNN as pip
# wheels; flax and optax are pinned too, so no newer flax can pull a newer jax past the plugin (the GPU
# backend would silently disappear). The pins are pyproject.toml's `jax-cuda` extra, which equal
# constraints.txt (tests/ops/test_docker_pins.py); the build checks the plugin's version and `pip check`.
# No torch. The NVIDIA wheels (nvidia-*-cu12) are not pinned here: the plugin asks for CUDA 12 and cuDNN 9
# at least, so they resolve to the newest CUDA 12.x at build time; /etc/ddm/installed.txt in the image
# records what was installed.
#
# DRIVER FLOOR (JAX's installation guide, CUDA 12): NVIDIA driver 525 or later (CUDA 12's minimum is
# 525.60.13; the newest driver is recommended) and a GPU of compute capability 5.2 (Maxwell) or newer;
# the host also needs the NVIDIA Container Toolkit.

FROM python:3.11-slim-bookworm AS source
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY . /src
RUN pip wheel --no-deps --wheel-dir /wheels /src \
 && mkdir -p /ckpt \
 && if [ -d /src/checkpoints ]; then cp -a /src/checkpoints/. /ckpt/; \
    else echo "note: no checkpoints/ in the build context; mount a deployment and set DDM_DEPLOYMENT"; fi

FROM python:3.11-slim-bookworm
LABEL org.ddm.nvidia-driver-min="525.60.13"
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1 \
    XLA_PYTHON_CLIENT_PREALLOCATE=false
COPY constraints.txt /etc/ddm/constraints.txt
# The stack in its own layer (GBs of CUDA wheels), so a source change does not reinstall it.
RUN pip install -c /etc/ddm/constraints.txt "jax[cuda12]==0.10.2" jaxlib==0.10.2 flax==0.12.8 optax==0.2.8
COPY --from=source /wheels /wheels
# The jax-cuda extra: the same pins as the layer above, so this adds only the package, its base deps and
# safetensors (a Flax expert imported from another format, Paris's, reads its own .safetensors file).
# Then: nothing conflicts, and the CUDA plugin is at jax's own version (pip check does not see extras).
RUN pip install -c /etc/ddm/constraints.txt "$(echo /wheels/ddm_pipeline-*.whl)[jax-cuda]" \
 && pip check \
 && python -c "from importlib.metadata import version as v; \
have = {p: v(p) for p in ('jax', 'jaxlib', 'jax-cuda12-plugin', 'jax-cuda12-pjrt')}; print(have); \
assert len(set(have.values())) == 1, f'jax and its CUDA plugin differ: {have}'" \
 && pip freeze > /etc/ddm/installed.txt \
 && rm -rf /wheels \
 && useradd --create-home --uid 10001 ddm \
 && mkdir -p /var/cache/ddm/jax && chown ddm /var/cache/ddm/jax
COPY --from=source --chown=ddm /ckpt /srv/ddm/checkpoints
WORKDIR /srv/ddm
# The JAX compile cache: a volume in docker-compose.yml, so a restarted expert loads its buckets compiled.
ENV DDM_DEPLOYMENT=/srv/ddm/checkpoints/mnist/deployment.toml DDM_JAX_CACHE_DIR=/var/cache/ddm/jax
USER ddm
CMD ["ddm", "--help"]
