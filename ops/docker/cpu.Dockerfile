# CPU image: the router, the web UI, and the PyTorch and JAX experts on CPU.
#   docker build -f ops/docker/cpu.Dockerfile -t ddm-pipeline:cpu .      (context: the repository root)
# Not built on the development machines (no Docker engine there); docker-compose.yml builds it.
# Every package at the version in constraints.txt; the extras it installs (torch, jax, ui) are
# pyproject.toml's, and an explicit pin here must equal theirs and constraints.txt's
# (tests/ops/test_docker_pins.py, tests/ops/test_compose.py). `pip check` fails the build on a conflict.

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
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY constraints.txt /etc/ddm/constraints.txt
# The CPU build of torch from PyTorch's own index: the default PyPI wheel brings the CUDA libraries (GBs).
# Its version, 2.13.0+cpu, sorts above PyPI's 2.13.0 (a local version label), so pip takes it; torch's
# dependencies come from PyPI at their pins. Its own layer, so a source change does not reinstall it.
RUN pip install -c /etc/ddm/constraints.txt --extra-index-url https://download.pytorch.org/whl/cpu \
    torch==2.13.0
COPY --from=source /wheels /wheels
# torch, jax, ui: the experts of both frameworks, the router and the web UI (no training, no plots)
RUN pip install -c /etc/ddm/constraints.txt "$(echo /wheels/ddm_pipeline-*.whl)[torch,jax,ui]" \
 && pip check \
 && pip freeze > /etc/ddm/installed.txt \
 && rm -rf /wheels \
 && useradd --create-home --uid 10001 ddm \
 && mkdir -p /var/cache/ddm/jax && chown ddm /var/cache/ddm/jax
COPY --from=source --chown=ddm /ckpt /srv/ddm/checkpoints
# Not the source tree: run from a folder without a ddm/ package in it (python -m must find the installed one).
WORKDIR /srv/ddm
# The JAX compile cache: a volume in docker-compose.yml, so a restarted expert loads its buckets compiled.
ENV DDM_DEPLOYMENT=/srv/ddm/checkpoints/mnist/deployment.toml DDM_JAX_CACHE_DIR=/var/cache/ddm/jax
USER ddm
CMD ["ddm", "--help"]
