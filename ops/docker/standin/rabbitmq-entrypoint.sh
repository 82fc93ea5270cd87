#!/bin/sh
# docker-entrypoint.sh of the rabbitmq stand-in (ops/docker/standin/rabbitmq.Dockerfile): the default user
# from the environment, as the official image does, then the node as the rabbitmq user.
set -eu
if [ "${1:-}" = rabbitmq-server ]; then
  shift
  if [ "$(id -u)" = 0 ]; then
    if [ -n "${RABBITMQ_DEFAULT_USER:-}" ] && [ -n "${RABBITMQ_DEFAULT_PASS:-}" ]; then
      umask 077
      {
        echo "default_user = $RABBITMQ_DEFAULT_USER"
        echo "default_pass = $RABBITMQ_DEFAULT_PASS"
        echo "loopback_users = none"
      } > /etc/rabbitmq/conf.d/10-defaults.conf
      chown rabbitmq:rabbitmq /etc/rabbitmq/conf.d/10-defaults.conf
      umask 022
    fi
    chown -R rabbitmq:rabbitmq /var/lib/rabbitmq
    exec setpriv --reuid=rabbitmq --regid=rabbitmq --init-groups /usr/lib/rabbitmq/bin/rabbitmq-server "$@"
  fi
  exec /usr/lib/rabbitmq/bin/rabbitmq-server "$@"
fi
exec "$@"
