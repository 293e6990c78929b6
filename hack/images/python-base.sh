#!/usr/bin/env bash
# Makes the local Python base image as an OCI archive: Debian bookworm's own
# python3 (3.11) with venv and pip, from Debian's package archive, for builds
# on machines that reach package archives but no image registry.
# Usage: python-base.sh OUT.tar IMAGE-NAME
# The image key is a hash of this file: change the recipe here, and every
# image built on it is rebuilt.
set -euo pipefail

suite=bookworm
# libstdc++6: the C++ runtime grpcio's wheels expect of the system (the public
# python images have it, as apt needs it; this image has no apt).
packages=python3,python3-venv,python3-pip,python-is-python3,ca-certificates,libstdc++6
mirror=http://deb.debian.org
rootfs=$(mktemp --suffix=.tar "$1.rootfs.XXXXXX")  # mmdebstrap writes a tar for .tar names
trap 'rm -f "$rootfs"' EXIT

# essential = dpkg, coreutils, bash and the rest of Debian's Essential set,
# without apt (nothing installs packages in the image). Documentation and man
# pages are left out, licences kept; device nodes are left to the runtime.
# The merged-usr hook sets up /usr the way bookworm expects it; without it
# apt resolves init-system-helpers' dependency with usrmerge, and so perl.
mmdebstrap --quiet --variant=essential --include="$packages" \
  --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
  --skip=output/dev \
  --dpkgopt='path-exclude=/usr/share/man/*' \
  --dpkgopt='path-exclude=/usr/share/doc/*' \
  --dpkgopt='path-include=/usr/share/doc/*/copyright' \
  "$suite" "$rootfs" \
  "deb $mirror/debian $suite main" \
  "deb $mirror/debian $suite-updates main" \
  "deb $mirror/debian-security $suite-security main" >&2

# SSL_CERT_FILE names Debian's CA bundle, which pip uses anyway, for uv: it
# otherwise trusts only its built-in roots, and so not a TLS-intercepting
# proxy's CA that the build mounts over this bundle (build.sh).
python3 "$(dirname "$0")/oci_archive.py" --out "$1" --ref "$2" --layer-tar "$rootfs" \
  --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  --env LANG=C.UTF-8 --env SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
  --cmd '["python3"]' >/dev/null
