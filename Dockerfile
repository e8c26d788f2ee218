# One image for all hyperplace components; the Deployments pick the console script
# (hyperplace-webhooks, hyperplace-controller, hyperplace-scheduler, hyperplace-certs).
#   docker build -t hyperplace:0.1.0 .
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /src
COPY . .
# A regular (non-editable) install, then drop the sources: the image runs from site-packages.
RUN pip install . && cd / && rm -rf /src

# Numeric UID/GID so the kubelet can verify runAsNonRoot without reading /etc/passwd.
RUN groupadd --system --gid 65532 hyperplace \
    && useradd --system --uid 65532 --gid 65532 --no-create-home --shell /usr/sbin/nologin hyperplace
USER 65532:65532
WORKDIR /

# The manifests set `command`; this default is only for `docker run hyperplace:0.1.0 --help`.
ENTRYPOINT ["hyperplace"]
