# Stand-in for redis:7.4.7, built ONLY where no image registry answers (ops/docker/e2e.sh): Debian
# bookworm's redis-server 7.0. Like the official image it runs as the redis user from /data (the volume of
# the append-only file), and takes redis-server's own arguments as its command (docker-compose.yml's).
FROM local/bookworm
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends redis-server redis-tools \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb \
 && mkdir -p /data /usr/local/etc/redis && chown redis:redis /data
WORKDIR /data
USER redis
EXPOSE 6379
CMD ["redis-server", "--protected-mode", "no"]
