# AWS Trainium / Inferentia2 image for the PyTorch expert (`ddm worker expert --device neuron`).
#   docker build -f ops/docker/neuron.Dockerfile -t ddm-pipeline:neuron .  (context: the repository root)
# Built on an AWS Neuron deep learning container, which brings torch, torch-neuronx, neuronx-cc and the
# Neuron runtime (torch-neuronx is not on PyPI). The host needs the Neuron driver (aws-neuronx-dkms)
# and the container needs the device: `--device /dev/neuron0` (docker-compose.yml maps it).
# NOT BUILT OR RUN HERE: the development machines have no Docker engine and no Trainium. The tag below
# is a public ECR Neuron PyTorch inference image of the Python 3.12 line (the package needs Python
# 3.11+); choose the one matching your host's Neuron driver and pass it with --build-arg.
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
COPY constraints.txt ops/docker/image_constraints.py /etc/ddm/
COPY --from=source /wheels /wheels
# constraints.txt, except that what the image already has keeps its version: its Neuron build of torch
# and the packages built with it (image_constraints.py).
RUN python3 /etc/ddm/image_constraints.py /etc/ddm/constraints.txt > /tmp/image-constraints.txt \
 && python3 -m pip install -c /tmp/image-constraints.txt "$(echo /wheels/ddm_pipeline-*.whl)[torch]" \
 && rm -rf /wheels /tmp/image-constraints.txt \
 && python3 -c "import torch_neuronx"  # fail the build early if the base lacks it
COPY --from=source /ckpt /srv/ddm/checkpoints
WORKDIR /srv/ddm
# neuronx-cc's persistent cache of compiled graphs: a volume in docker-compose.yml
ENV DDM_DEPLOYMENT=/srv/ddm/checkpoints/mnist/deployment.toml \
    NEURON_COMPILE_CACHE_URL=/var/tmp/neuron-compile-cache
# The base image's entrypoint starts its own model server; run our command instead. Root, as the base
# image expects, for access to /dev/neuron*.
ENTRYPOINT []
CMD ["ddm", "--help"]
