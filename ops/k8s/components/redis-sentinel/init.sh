#!/bin/sh
# The redis-sentinel StatefulSet's init container: writes this pod's redis.conf and sentinel.conf into
# /etc/redis-run (an emptyDir, owner-only; the passwords are in the files, never on a command line).
# The Sentinels take a password of their own (SENTINEL_PASSWORD, requirepass): they use it with each other
# too, and the clients give it as ?sentinel_password= in DDM_REDIS_URL.
# The master is the one the other pods' Sentinels name (after a failover it need not be pod 0); when no
# Sentinel answers (the first start), pod 0.
set -eu
HEADLESS="ddm-redis-headless.${POD_NAMESPACE}.svc"
SELF="${HOSTNAME}.${HEADLESS}"
MASTER=""
for i in 0 1 2; do
  host="ddm-redis-${i}.${HEADLESS}"
  [ "$host" = "$SELF" ] && continue
  answer=$(REDISCLI_AUTH="${SENTINEL_PASSWORD}" timeout 3 redis-cli --raw -h "$host" -p 26379 \
    sentinel get-master-addr-by-name ddm 2>/dev/null | head -n 1 || true)
  case "$answer" in
    ""|*ERR*|*rror*|*AUTH*|*WRONGPASS*) ;;
    *) MASTER="$answer"; break ;;
  esac
done
[ -n "$MASTER" ] || MASTER="ddm-redis-0.${HEADLESS}"
echo "this pod: ${SELF}; master: ${MASTER}"
umask 077
{
  echo "requirepass ${REDIS_PASSWORD}"
  echo "masterauth ${REDIS_PASSWORD}"
  echo "replica-announce-ip ${SELF}"
  echo "dir /data"
  # as docker-compose.yml: the append-only file, fsynced every second; capped memory, never evicting
  echo "appendonly yes"
  echo "appendfsync everysec"
  echo "maxmemory ${REDIS_MAXMEMORY}"
  echo "maxmemory-policy noeviction"
  [ "$MASTER" = "$SELF" ] || echo "replicaof ${MASTER} 6379"
} > /etc/redis-run/redis.conf
{
  echo "port 26379"
  echo "requirepass ${SENTINEL_PASSWORD}"
  echo "dir /tmp"
  echo "sentinel resolve-hostnames yes"
  echo "sentinel announce-hostnames yes"
  echo "sentinel announce-ip ${SELF}"
  echo "sentinel monitor ddm ${MASTER} 6379 2"
  echo "sentinel auth-pass ddm ${REDIS_PASSWORD}"
  # seconds of paused jobs before a failover starts (docs/DEPLOY.md section 9: the default is 30 s)
  echo "sentinel down-after-milliseconds ddm 5000"
  echo "sentinel failover-timeout ddm 60000"
  echo "sentinel parallel-syncs ddm 1"
} > /etc/redis-run/sentinel.conf
