# AWS Trainium / Inferentia2 image for the PyTorch expert (`ddm worker expert --device neuron`).
#   docker build -f ops/docker/neuron.Dockerfile -t ddm-pipeline:neuron .  (context: the repository root)
# NOT BUILT OR RUN HERE: the development machines have no Docker engine and no Trainium.
#
# Built on an AWS Neuron deep learning container, which brings torch, torch-neuronx, neuronx-cc, their
# runtime libraries (libneuronxla, the Neuron runtime) and Python 3.12 (the package needs 3.11+). The host
# needs the Neuron driver (aws-neuronx-dkms) and the container the device: docker-compose.yml maps
# /dev/neuron0 into two services, one per NeuronCore (NEURON_RT_VISIBLE_CORES=0 and 1).
#
# THE TRACE-CAPABLE LINE. The worker compiles with `torch_neuronx.trace`, which lives in the XLA-based
# torch-neuronx 2.9 (in maintenance; last shipped in Neuron SDK 2.31). Since SDK 2.33 the package named
# torch-neuronx 2.13+ is a native backend without trace, for Trainium2/3 only. So the base below is a
# PyTorch 2.9 image, and the install takes pyproject.toml's `neuron` extra (torch==2.9.*,
# torch-neuronx==2.9.*, neuronx-cc==2.*, safetensors) and nothing else: no JAX, no flax, no torch 2.13.
# A base of another line fails the build: the extra's pins cannot be met (torch is held at the base's
# version), or the trace check at the end fails. Pick a tag of the 2.9 line that matches your host's
# Neuron driver and pass it with --build-arg NEURON_BASE_IMAGE=... (docker-compose.yml: NEURON_BASE_IMAGE).
#
# PIP CHECK. AWS's base image may carry requirement conflicts of its own; a plain `pip check` would fail
# every build on them and `|| true` would hide ours. pip_check.py records the base's problems before our
# install and fails the build only on a new one (the log lists both).
ARG NEURON_BASE_IMAGE=public.ecr.aws/neuron/pytorch-inference-neuronx:2.9.0-neuronx-py312-sdk2.27.1-ubuntu24.04

FROM python:3.11-slim-bookworm AS source
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY . /src
RUN pip wheel --no-deps --wheel-dir /wheels /src \
 && mkdir -p /ckpt \
 && if [ -d /src/checkpoints ]; then cp -a /src/checkpoints/. /ckpt/; \
    else echo "note: no checkpoints/ in the build context; mount a deployment and set DDM_DEPLOYMENT"; fi

FROM ${NEURON_BASE_IMAGE}
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
COPY constraints.txt ops/docker/image_constraints.py ops/docker/pip_check.py /etc/ddm/
RUN python3 /etc/ddm/pip_check.py save /etc/ddm/pip-check-base.txt
COPY --from=source /wheels /wheels
# constraints.txt, except that what the image already has keeps its version: its Neuron build of torch,
# numpy and the packages built with them (image_constraints.py). AWS's index is there for a Neuron
# package the base lacks; the packages the base has already meet the extra's pins and stay as they are.
RUN python3 /etc/ddm/image_constraints.py /etc/ddm/constraints.txt > /tmp/image-constraints.txt \
 && python3 -m pip install -c /tmp/image-constraints.txt --extra-index-url https://pip.repos.neuron.amazonaws.com \
    "$(echo /wheels/ddm_pipeline-*.whl)[neuron]" \
 && rm -rf /wheels /tmp/image-constraints.txt \
 && python3 /etc/ddm/pip_check.py compare /etc/ddm/pip-check-base.txt \
 && python3 -c "import torch_neuronx; torch_neuronx.trace; print('torch-neuronx with trace: ok')" \
 && python3 -m pip freeze > /etc/ddm/installed.txt \
 && install -d -m 0700 /var/cache/ddm/traced
COPY --from=source /ckpt /srv/ddm/checkpoints
WORKDIR /srv/ddm
# Two caches, both volumes in docker-compose.yml, so a restart compiles nothing:
#   NEURON_COMPILE_CACHE_URL  neuronx-cc's own cache of compiled graphs (shared by the core services);
#   DDM_TRACE_CACHE_DIR       the worker's saved traced model of every batch bucket (torch.jit.save),
#                             one volume per service; loaded as code, so only root (the worker) may write.
ENV DDM_DEPLOYMENT=/srv/ddm/checkpoints/mnist/deployment.toml \
    NEURON_COMPILE_CACHE_URL=/var/tmp/neuron-compile-cache \
    DDM_TRACE_CACHE_DIR=/var/cache/ddm/traced
# The base image's entrypoint starts its own model server; run our command instead. Root, as the base
# image expects, for access to /dev/neuron*.
ENTRYPOINT []
CMD ["ddm", "--help"]
