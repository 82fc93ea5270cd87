# Stand-in for python:3.11-slim-bookworm, built ONLY where no image registry answers (ops/docker/e2e.sh).
# Debian bookworm's own Python 3.11 in a venv that comes first on PATH, so `python`, `python3` and `pip`
# behave as in the official image (the venv's pip comes from ensurepip: no python3-pip package).
# The build context (made by e2e.sh) holds this file and certs/: the host's extra CA certificates, since
# outgoing HTTPS from the development machines is intercepted and pip in a container would otherwise fail
# with CERTIFICATE_VERIFY_FAILED. Never used where a registry answers: the official image is pulled then.
FROM local/bookworm
RUN apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends \
      python3 python3-venv ca-certificates \
 && rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/cache/apt/archives/*.deb
COPY certs/ /usr/local/share/ca-certificates/
RUN update-ca-certificates && python3 -m venv /opt/venv
ENV PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    REQUESTS_CA_BUNDLE=/etc/ssl/certs/ca-certificates.crt \
    LANG=C.UTF-8
CMD ["python3"]
