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
COPY --from=source /wheels /wheels
# Keep the image's Neuron build of torch: pin it while pip installs the package and its dependencies.
RUN python3 -c "import torch; print('torch==' + torch.__version__)" > /tmp/keep-torch.txt \
 && python3 -m pip install --constraint /tmp/keep-torch.txt /wheels/*.whl \
 && rm -rf /wheels /tmp/keep-torch.txt \
 && python3 -c "import torch_neuronx"  # fail the build early if the base lacks it
COPY --from=source /ckpt /srv/ddm/checkpoints
WORKDIR /srv/ddm
ENV DDM_DEPLOYMENT=/srv/ddm/checkpoints/mnist/deployment.toml
# The base image's entrypoint starts its own model server; run our command instead. Root, as the base
# image expects, for access to /dev/neuron*.
ENTRYPOINT []
CMD ["ddm", "--help"]
