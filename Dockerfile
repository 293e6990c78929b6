# syntax=docker/dockerfile:1
# One image for both components of the driver:
#   trainium-dra controller ...   (Deployment; runs as the image's non-root user)
#   trainium-dra node ...         (DaemonSet; the chart runs it as root, see below)
#
# The base image is pinned by Python patch release and Debian release. Image
# digests could not be looked up where this file was written (no registry
# access); add @sha256:... with `docker buildx imagetools inspect` before
# publishing. Python dependencies are pinned by uv.lock (`--frozen`), uv by
# version (the Makefile's UV_VERSION).
# Without a registry, `make image` builds a base with Debian's own python3
# (3.11, from Debian packages) and passes it as PYTHON_IMAGE; both bases have
# `python` and `pip` on PATH, which is all the stages below need (docs/images.md).
ARG PYTHON_IMAGE=python:3.11.14-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ARG UV_VERSION=0.13.8
# Debian's python3 marks its pip externally managed (PEP 668); uv is the one
# package pip installs, into a builder stage that is thrown away.
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_BREAK_SYSTEM_PACKAGES=1 \
    PIP_NO_CACHE_DIR=1 \
    UV_FROZEN=1 \
    UV_COMPILE_BYTECODE=1 \
    UV_LINK_MODE=copy \
    UV_NO_CACHE=1 \
    UV_PYTHON_DOWNLOADS=never
RUN pip install "uv==${UV_VERSION}"
WORKDIR /app
# Dependencies first, so this layer is rebuilt only when the lock changes:
# /opt/venv holds the runtime dependencies only; /opt/protoc the dev group,
# whose grpcio-tools generates the kubelet API modules and is left behind.
COPY pyproject.toml uv.lock README.md ./
RUN UV_PROJECT_ENVIRONMENT=/opt/venv uv sync --no-dev --no-install-project \
 && UV_PROJECT_ENVIRONMENT=/opt/protoc uv sync --only-group dev --no-install-project
COPY driver/ driver/
COPY simdevice/ simdevice/
COPY hack/gen_protos.py hack/gen_protos.py
# Generated, never committed: driver/kubeletplugin/protocol/gen/. Then install the
# project itself (editable: /app is on the venv's path, console script trainium-dra),
# with every dependency compiled to bytecode: the pods run with a read-only root
# and PYTHONDONTWRITEBYTECODE, so anything left uncompiled is compiled again at
# every start.
RUN /opt/protoc/bin/python hack/gen_protos.py \
 && UV_PROJECT_ENVIRONMENT=/opt/venv uv sync --no-dev --compile-bytecode

FROM ${PYTHON_IMAGE}
ENV PATH=/opt/venv/bin:${PATH} \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1
COPY --from=builder /opt/venv /opt/venv
COPY --from=builder /app/driver /app/driver
COPY --from=builder /app/simdevice /app/simdevice
# Compile once here (the chart mounts the root filesystem read-only), and fail
# the build rather than a pod when the generated modules are missing or stale:
# without grpcio-tools the import below cannot regenerate them.
RUN python -m compileall -q /app/driver /app/simdevice \
 && python -c "import driver.kubeletplugin.protocol, driver.node.main, driver.controller.main" \
 && trainium-dra --help > /dev/null \
 && nccom-test -r 2 --chips 0,1 allr > /dev/null
# Non-root by default: the controller needs nothing else. The node daemon
# creates sockets in the kubelet's root-owned plugin directories and files in
# the root-owned CDI directory on the host, so the chart runs that container
# as UID 0, with no capabilities and no privilege escalation.
USER 65532:65532
WORKDIR /app
ENTRYPOINT ["trainium-dra"]
CMD ["--help"]
