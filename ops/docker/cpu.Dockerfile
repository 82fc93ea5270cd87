# CPU images, one per role, each with only what that role imports (issue 27). Build one with --target:
#   docker build -f ops/docker/cpu.Dockerfile --target webui -t ddm-pipeline:webui .    (context: the repo root)
#
#   target          extras        what it runs                                   no
#   webui           ui            gunicorn + the Flask-SocketIO UI               torch, jax
#   router          (none)        `ddm worker router`, a label (oracle) router   torch, jax
#   router-learned  jax           `ddm worker router`, a learned (JAX) router    torch
#                                 (the shipped deployments' routers: router/learned.py)
#   expert-torch    torch         `ddm worker expert` of a PyTorch checkpoint    jax
#   expert-jax      jax           `ddm worker expert` of a JAX/Flax checkpoint   torch
#   torch-import    import        an imported deployment's CPU stages: Paris's   jax
#                   (torch,       router (PyTorch), the CLIP text encoder
#                   transformers, (transformers), the AutoencoderKL decoder
#                   diffusers)    (diffusers), and `ddm import` itself
#                                 (docker-compose.yml's paris profile, ops/k8s/components/paris)
#
# docker-compose.yml builds each service from its target. ops/docker/e2e.sh builds the first five and checks
# in each image that the frameworks it must not carry do not import (docs/DEPLOY.md has the sizes);
# ops/docker/paris_e2e.sh builds torch-import and serves the paris profile with it.
# Every package at the version in constraints.txt; the extras installed (torch, jax, ui) are
# pyproject.toml's, and an explicit pin here must equal theirs and constraints.txt's
# (tests/ops/test_docker_pins.py, tests/ops/test_compose.py). `pip check` fails the build on a conflict.
#
# WHERE TORCH COMES FROM (expert-torch and torch-import: the torch-cpu layer): build arguments.
#   TORCH_INDEX_URL   an index with the CPU build; default PyTorch's own CPU index. The default PyPI wheel
#                     brings the CUDA libraries (GBs). Empty: no extra index.
#   TORCH_FIND_LINKS  a find-links URL or path that holds the wheel (a local wheel folder served over http,
#                     as e2e.sh does: --build-arg TORCH_INDEX_URL= --build-arg
#                     TORCH_FIND_LINKS=http://127.0.0.1:PORT/ with --network host). Default empty.
# The CPU build's version, 2.13.0+cpu, sorts above PyPI's 2.13.0 (a local version label), so pip takes it
# from either source; torch's dependencies come from PyPI at their pins.

# ---- the package as a wheel, and the shipped checkpoints (if the context has them)
FROM python:3.11-slim-bookworm AS source
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY . /src
RUN pip wheel --no-deps --wheel-dir /wheels /src \
 && mkdir -p /ckpt \
 && if [ -d /src/checkpoints ]; then cp -a /src/checkpoints/. /ckpt/; \
    else echo "note: no checkpoints/ in the build context; mount a deployment and set DDM_DEPLOYMENT"; fi

# ---- what every role shares: the user, the constraints, the settings; no packages yet
FROM python:3.11-slim-bookworm AS base
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY constraints.txt /etc/ddm/constraints.txt
RUN useradd --create-home --uid 10001 ddm \
 && mkdir -p /var/cache/ddm/jax && chown ddm /var/cache/ddm/jax
# Not the source tree: run from a folder without a ddm/ package in it (python -m must find the installed one).
WORKDIR /srv/ddm
# The JAX compile cache (expert-jax, router-learned): a volume in docker-compose.yml, so a restarted
# process loads its compiled shapes.
ENV DDM_DEPLOYMENT=/srv/ddm/checkpoints/mnist/deployment.toml DDM_JAX_CACHE_DIR=/var/cache/ddm/jax
CMD ["ddm", "--help"]

# ---- the web UI: Flask-SocketIO under gunicorn; reads Redis, publishes jobs; no torch, no JAX
FROM base AS webui
COPY --from=source /wheels /wheels
RUN pip install -c /etc/ddm/constraints.txt "$(echo /wheels/ddm_pipeline-*.whl)[ui]" \
 && pip check \
 && pip freeze > /etc/ddm/installed.txt \
 && rm -rf /wheels
USER ddm

# ---- a router for label (oracle) routing: the base install only
FROM base AS router
COPY --from=source /wheels /wheels
RUN pip install -c /etc/ddm/constraints.txt "$(echo /wheels/ddm_pipeline-*.whl)" \
 && pip check \
 && pip freeze > /etc/ddm/installed.txt \
 && rm -rf /wheels
COPY --from=source --chown=ddm /ckpt /srv/ddm/checkpoints
USER ddm

# ---- a router whose deployment's router is learned (a JAX net): JAX, no torch
FROM base AS router-learned
COPY --from=source /wheels /wheels
RUN pip install -c /etc/ddm/constraints.txt "$(echo /wheels/ddm_pipeline-*.whl)[jax]" \
 && pip check \
 && pip freeze > /etc/ddm/installed.txt \
 && rm -rf /wheels
COPY --from=source --chown=ddm /ckpt /srv/ddm/checkpoints
USER ddm

# ---- an expert of a JAX/Flax checkpoint: JAX, no torch
FROM base AS expert-jax
COPY --from=source /wheels /wheels
RUN pip install -c /etc/ddm/constraints.txt "$(echo /wheels/ddm_pipeline-*.whl)[jax]" \
 && pip check \
 && pip freeze > /etc/ddm/installed.txt \
 && rm -rf /wheels
COPY --from=source --chown=ddm /ckpt /srv/ddm/checkpoints
USER ddm

# ---- torch's CPU build, alone: the layer expert-torch and torch-import share
FROM base AS torch-cpu
ARG TORCH_INDEX_URL=https://download.pytorch.org/whl/cpu
ARG TORCH_FIND_LINKS=
# torch in its own layer, so a source change does not reinstall it. An http:// find-links host is
# trusted explicitly (pip ignores plain-http sources otherwise).
RUN case "$TORCH_FIND_LINKS" in http://*) host=$(printf %s "$TORCH_FIND_LINKS" | sed -E 's#^http://([^/]+).*#\1#');; *) host=;; esac; \
    pip install -c /etc/ddm/constraints.txt ${TORCH_INDEX_URL:+--extra-index-url "$TORCH_INDEX_URL"} \
    ${TORCH_FIND_LINKS:+--find-links "$TORCH_FIND_LINKS"} ${host:+--trusted-host "$host"} torch==2.13.0 \
 && python -c "import torch; print('torch', torch.__version__)"

# ---- an expert of a PyTorch checkpoint: torch (CPU build), no JAX
FROM torch-cpu AS expert-torch
COPY --from=source /wheels /wheels
RUN pip install -c /etc/ddm/constraints.txt "$(echo /wheels/ddm_pipeline-*.whl)[torch]" \
 && pip check \
 && pip freeze > /etc/ddm/installed.txt \
 && rm -rf /wheels
COPY --from=source --chown=ddm /ckpt /srv/ddm/checkpoints
USER ddm

# ---- the CPU stages of an imported deployment (`ddm import paris|dit`, docs/DEPLOY.md "Serving Paris"):
# torch with transformers and diffusers (the import extra), no JAX. It runs Paris's router (a PyTorch net
# in the router worker), the CLIP text-encoder stage, the AutoencoderKL decoder stage, and `ddm import`.
# HF_HUB_OFFLINE: transformers and diffusers read the mounted folders only and never try the hub.
FROM torch-cpu AS torch-import
ENV HF_HUB_OFFLINE=1
COPY --from=source /wheels /wheels
RUN pip install -c /etc/ddm/constraints.txt "$(echo /wheels/ddm_pipeline-*.whl)[import]" \
 && pip check \
 && pip freeze > /etc/ddm/installed.txt \
 && rm -rf /wheels
COPY --from=source --chown=ddm /ckpt /srv/ddm/checkpoints
USER ddm
