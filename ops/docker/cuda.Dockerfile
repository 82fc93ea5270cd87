# NVIDIA GPU image for the PyTorch expert (`ddm worker expert --device cuda`).
#   docker build -f ops/docker/cuda.Dockerfile -t ddm-pipeline:cuda .     (context: the repository root)
# NOT BUILT OR RUN HERE: the development machines have no Docker engine and no GPU.
#
# DRIVER FLOOR. The torch wheel PyPI serves for torch==2.13.0 on Linux x86_64 is a CUDA 13.0 build (its
# metadata requires cuda-toolkit 13.0.3 and the nvidia-*-cu13 wheels, which it brings with it, so a slim
# base is enough). CUDA 13.0 needs, on the host:
#   - NVIDIA driver 580.65.06 or later (`nvidia-smi` prints it), and the NVIDIA Container Toolkit;
#   - a Turing or newer GPU (compute capability 7.5+): CUDA 13 dropped Maxwell, Pascal and Volta.
# On an older driver torch finds no usable GPU and the worker stops at start.
#
# A CUDA 12 VARIANT, for hosts with an older driver: build with PyTorch's own index for a CUDA 12 build,
#   docker build --build-arg TORCH_EXTRA_INDEX_URL=https://download.pytorch.org/whl/cu126 \
#     --build-arg NVIDIA_DRIVER_MIN=525.60.13 -f ops/docker/cuda.Dockerfile -t ddm-pipeline:cuda12 .
# (docker-compose.yml: DDM_TORCH_EXTRA_INDEX_URL). Its version, 2.13.0+cu126, sorts above PyPI's 2.13.0,
# so pip takes it. This only works if PyTorch publishes that build of the pinned version (torch 2.13.0
# for CUDA 12.x): that was NOT checked here (PyTorch's index is out of reach of these machines), and the
# variant was never built. If it does not exist, the build fails at this line; pin a torch that has one.
# Its driver floor is CUDA 12's: 525.60.13 or later, with a GPU that build supports.
#
# Versions: the `torch` extra of pyproject.toml at constraints.txt's pins (tests/ops/test_docker_pins.py
# checks the pin below against both); `pip check` fails the build on a conflict.

FROM python:3.11-slim-bookworm AS source
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY . /src
RUN pip wheel --no-deps --wheel-dir /wheels /src \
 && mkdir -p /ckpt \
 && if [ -d /src/checkpoints ]; then cp -a /src/checkpoints/. /ckpt/; \
    else echo "note: no checkpoints/ in the build context; mount a deployment and set DDM_DEPLOYMENT"; fi

FROM python:3.11-slim-bookworm
# empty: PyPI's torch (CUDA 13.0); a PyTorch index URL: that CUDA build (see above)
ARG TORCH_EXTRA_INDEX_URL=
ARG NVIDIA_DRIVER_MIN=580.65.06
# `docker inspect` shows what the host needs
LABEL org.ddm.nvidia-driver-min="${NVIDIA_DRIVER_MIN}"
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY constraints.txt /etc/ddm/constraints.txt
# torch in its own layer (GBs of CUDA wheels), so a source change does not reinstall it
RUN pip install -c /etc/ddm/constraints.txt \
    ${TORCH_EXTRA_INDEX_URL:+--extra-index-url "$TORCH_EXTRA_INDEX_URL"} torch==2.13.0 \
 && python -c "import torch; print('torch', torch.__version__, 'built for CUDA', torch.version.cuda)"
COPY --from=source /wheels /wheels
RUN pip install -c /etc/ddm/constraints.txt "$(echo /wheels/ddm_pipeline-*.whl)[torch]" \
 && pip check \
 && pip freeze > /etc/ddm/installed.txt \
 && rm -rf /wheels \
 && useradd --create-home --uid 10001 ddm
COPY --from=source --chown=ddm /ckpt /srv/ddm/checkpoints
WORKDIR /srv/ddm
ENV DDM_DEPLOYMENT=/srv/ddm/checkpoints/mnist/deployment.toml
USER ddm
CMD ["ddm", "--help"]
