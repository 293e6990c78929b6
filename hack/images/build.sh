#!/usr/bin/env bash
# Builds the project's container images with no image registry and exports
# each as an OCI archive into a cache outside the repo, ready for
# `ctr -n k8s.io images import --all-platforms <archive>` (docs/images.md):
#   localhost/trainium-dra/python-base:<key>  Debian bookworm's python3, from
#                                             Debian packages (python-base.sh)
#   localhost/trainium-dra/driver:<key>       the Dockerfile, built on that base
#   localhost/trainium-dra/pause:<version>    the sandbox image: upstream pause.c
#                                             from the Kubernetes module, static
# An archive whose content key is already in the cache is not rebuilt.
# Installs buildah, mmdebstrap, gcc and libc6-dev with apt-get when missing
# (CI runs on a fresh machine, as root).
#   TRAINIUM_DRA_CACHE  cache root (default: ~/.cache/trainium-dra)
set -euo pipefail
shopt -s inherit_errexit  # a failure inside $(...) stops the build too

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${TRAINIUM_DRA_CACHE:-$HOME/.cache/trainium-dra}
out="$cache/images"
mkdir -p "$out"
started=$SECONDS

log() { echo "build-images: $*" >&2; }
# shellcheck source=../lib/debian-packages.sh
. "$here/../lib/debian-packages.sh"
key_of() { cat "$@" | sha256sum | cut -c1-16; }

# Not buildah's recommended crun: it refuses hosts with hybrid cgroups, and
# RUN steps here use chroot isolation, no runtime at all.
install_image_tools() {
  install_missing "building images" buildah mmdebstrap gcc "/usr/lib/$(uname -m)-linux-gnu/libc.a:libc6-dev"
}

# Project-owned configuration, so nothing depends on (or changes) the host's
# /etc/containers; images live in their own store under the cache.
export CONTAINERS_CONF="$here/containers.conf"
export CONTAINERS_REGISTRIES_CONF="$here/registries.conf"
export CONTAINERS_STORAGE_CONF="$here/storage.conf"
export BUILDAH_ISOLATION=chroot
policy=(--signature-policy "$here/policy.json")
bah() { buildah --root "$cache/buildah/storage" --runroot "$cache/buildah/run" "$@"; }
have_image() { bah inspect --type image "$1" >/dev/null 2>&1; }
# The stable name of an archive, swapped in at once: `make test`'s lanes may
# read it while another lane's set-up runs this script again.
link_as() { ln -sfn "$1" "$2.$$.tmp" && mv -Tf "$2.$$.tmp" "$2"; }

# Debian's python3 (3.11) as a one-layer image, imported into the store.
python_base() {
  local key ref archive
  key=$(key_of "$here/python-base.sh")
  ref=localhost/trainium-dra/python-base:$key
  archive="$out/python-base-$key.tar"
  if [ ! -f "$archive" ]; then
    log "making $ref from Debian packages (mmdebstrap; a few minutes)"
    "$here/python-base.sh" "$archive" "$ref"
  fi
  if ! have_image "$ref"; then
    # Named by the archive's ref.name annotation.
    bah pull "${policy[@]}" --quiet "oci-archive:$archive" >/dev/null
    have_image "$ref"
  fi
  echo "$ref"
}

driver_image() {
  local base=$1 key ref archive
  key=$(cd "$root" && python3 -m localsim.images driver-key)
  ref=localhost/trainium-dra/driver:$key
  archive="$out/driver-$key.tar"
  if [ ! -f "$archive" ]; then
    log "building $ref from the Dockerfile on $base"
    # --layers: a change to driver/ reuses the dependency layers of the last build.
    # RUN steps trust what this host trusts (such as a TLS-intercepting proxy's
    # CA) through its bundle mounted over the base's; no image keeps it.
    bah bud "${policy[@]}" --pull=never --layers --isolation chroot \
      --volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro \
      --build-arg "PYTHON_IMAGE=$base" --tag "$ref" --file "$root/Dockerfile" "$root" >&2
    # As the image's user, each command the chart runs must at least start.
    ctr=$(bah from --pull=never "${policy[@]}" "$ref")
    trap 'bah rm "$ctr" >/dev/null' EXIT # also on failure: no container left mounted
    for args in "--help" "node --help" "controller --help"; do
      # shellcheck disable=SC2086 # the words of $args are the command's arguments
      bah run --isolation chroot "$ctr" -- trainium-dra $args >/dev/null
    done
    bah rm "$ctr" >/dev/null
    trap - EXIT
    bah push "${policy[@]}" --quiet "$ref" "oci-archive:$archive.partial:$ref"
    mv "$archive.partial" "$archive"
  fi
  link_as "driver-$key.tar" "$out/driver.tar"
}

pause_image() {
  local k8s_version dir version key ref archive
  k8s_version=$(cd "$here/../k8s" && go list -m -f '{{.Version}}' k8s.io/kubernetes)
  dir=$(go mod download -json "k8s.io/kubernetes@$k8s_version" |
    python3 -c 'import json, sys; print(json.load(sys.stdin)["Dir"])')
  # The version upstream tags the image it builds from this pause.c with.
  version=$(awk '$1 == "TAG" && $2 == "?=" {print $3}' "$dir/build/pause/Makefile")
  local cflags=(-Os -Wall -Werror -static -s "-DVERSION=v$version")
  key=$(key_of "$dir/build/pause/linux/pause.c" <(echo "${cflags[*]}"))
  ref=localhost/trainium-dra/pause:$version
  archive="$out/pause-$version-$key.tar"
  if [ ! -f "$archive" ]; then
    log "building $ref from k8s.io/kubernetes@$k8s_version build/pause/linux/pause.c"
    local bin
    bin=$(mktemp -d)
    gcc "${cflags[@]}" -o "$bin/pause" "$dir/build/pause/linux/pause.c"
    "$bin/pause" -v | grep -qx "pause.c v$version"
    python3 "$here/oci_archive.py" --out "$archive" --ref "$ref" \
      --file "$bin/pause:/pause:0755" --entrypoint '["/pause"]' >/dev/null
    rm -rf "$bin"
  fi
  link_as "$(basename "$archive")" "$out/pause.tar"
}

install_image_tools
base=$(python_base)
driver_image "$base"
pause_image
log "done in $((SECONDS - started))s; archives:"
ls -l "$out"/driver.tar "$out"/pause.tar >&2
