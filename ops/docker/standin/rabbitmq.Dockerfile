# Stand-in for rabbitmq:4.1.4-management, built ONLY where no image registry answers (ops/docker/e2e.sh):
# Debian bookworm's rabbitmq-server 3.10 with the management plugin. What docker-compose.yml relies on
# from the official image, kept here:
#   - RABBITMQ_DEFAULT_USER / RABBITMQ_DEFAULT_PASS create the first user (docker-entrypoint.sh writes
#     them into a conf.d file before the node starts);
#   - every file in /etc/rabbitmq/conf.d/ is read (compose mounts 20-ddm.conf, and the ha profile's
#     20-ddm-ha.conf with its classic-config peer discovery);
#   - `docker-entrypoint.sh` is on PATH (the ha profile's entrypoint writes the Erlang cookie to
#     /var/lib/rabbitmq/.erlang.cookie, owned by rabbitmq, then execs `docker-entrypoint.sh
#     rabbitmq-server`), HOME is /var/lib/rabbitmq so the server and the CLI (rabbitmq-diagnostics, the
#     healthcheck, run as root) read that one cookie;
#   - the node runs as the rabbitmq user, named rabbit@<hostname>.
# Debian's 3.10 has quorum queues (the ha profile's DDM_QUEUE_TYPE=quorum). It is not 4.1: where a
# registry answers, the official image is used unchanged.
FROM local/bookworm
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends rabbitmq-server \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb \
 && mkdir -p /etc/rabbitmq/conf.d /var/lib/rabbitmq /var/log/rabbitmq \
 && chown -R rabbitmq:rabbitmq /var/lib/rabbitmq /var/log/rabbitmq \
 && echo '[rabbitmq_management,rabbitmq_prometheus].' > /etc/rabbitmq/enabled_plugins
COPY rabbitmq-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
ENV HOME=/var/lib/rabbitmq RABBITMQ_LOGS=- RABBITMQ_CONFIG_FILES=/etc/rabbitmq/conf.d
EXPOSE 5672 15672
ENTRYPOINT ["docker-entrypoint.sh"]
CMD ["rabbitmq-server"]
