#!/usr/bin/env bash
# Builds the kind node image without a registry or `kind build node-image`
# (which needs docker), exports it as an OCI archive into the cache and loads
# it into the container engine kind uses (podman or docker):
#   - a Debian bookworm root filesystem from mmdebstrap: systemd, runc,
#     iptables and the tools kind's node entrypoint calls;
#   - kind's own node files (entrypoint, kubelet unit and drop-ins, cgroup
#     helpers), taken from the pinned sigs.k8s.io/kind module;
#   - our Go-built containerd, kubelet, kubeadm, kubectl and CNI plugins,
#     with the project's containerd config and units, and the pod network
#     service that writes each node's CNI config and routes (hack/kind/node/);
#   - the images kubeadm runs, named as `kubeadm config images list` says and
#     built from our binaries, plus the project's pause image, all imported
#     into the node's containerd at boot (import-images.service).
# The archive's name carries a key of every input; a cached one is reused.
#   KIND_PROVIDER       podman or docker (default: what hack/kind/provider.sh finds)
#   TRAINIUM_DRA_CACHE  cache root (default: ~/.cache/trainium-dra)
# Prints the image's name on its last line.
set -euo pipefail
shopt -s inherit_errexit

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
cache=${TRAINIUM_DRA_CACHE:-$HOME/.cache/trainium-dra}
provider=${KIND_PROVIDER:-$("$here/provider.sh")}
log() { echo "kind-node-image: $*" >&2; }
pinned() { (cd "$1" && go list -m -f '{{.Version}}' "$2"); }

k8s_version=$(pinned "$here/k8s" k8s.io/kubernetes)
kind_version=$(pinned "$here/kind" sigs.k8s.io/kind)
containerd_version=$(pinned "$root/hack/containerd" github.com/containerd/containerd/v2)
cni_version=$(pinned "$root/hack/cni" github.com/containernetworking/plugins)
etcd_version=$(pinned "$root/hack/etcd" go.etcd.io/etcd/server/v3)
bins="$cache/k8s/$k8s_version"
containerd_dir="$cache/node/containerd-$containerd_version"
cni_dir="$cache/node/cni-$cni_version"
kind_files="$(cd "$here/kind" && go list -m -f '{{.Dir}}' sigs.k8s.io/kind)/images/base/files"
pause_archive=$(readlink -f "$cache/images/pause.tar")
for need in "$bins/kubelet" "$bins/kubeadm" "$bins/kubectl" "$bins/kube-proxy" "$bins/etcd-$etcd_version" \
  "$containerd_dir/containerd" "$cni_dir/bridge" "$pause_archive"; do
  [ -e "$need" ] || { log "missing $need: run make binaries image kind-tools first"; exit 1; }
done
sandbox=$(python3 -c 'import json, sys, tarfile; t = tarfile.open(sys.argv[1]); print(json.load(t.extractfile("index.json"))["manifests"][0]["annotations"]["org.opencontainers.image.ref.name"])' "$pause_archive")

key=$(cat "$0" "$here"/node/* <(echo "$k8s_version $kind_version $containerd_version $cni_version $etcd_version $sandbox") | sha256sum | cut -c1-16)
ref=localhost/trainium-dra/kind-node:$key
archive="$cache/kind/node-$key.tar"
mkdir -p "$cache/kind"

build() {
  local work rootfs images
  work=$(mktemp -d "$cache/kind/build.XXXXXX")
  trap 'rm -rf "$work"' RETURN
  rootfs="$work/rootfs"
  images="$work/images"
  mkdir -p "$images"

  log "root filesystem from Debian packages (mmdebstrap)"
  # The merged-usr hook sets up /usr as bookworm expects (as in python-base.sh).
  # Its log is shown only when it fails.
  if ! mmdebstrap --quiet --variant=essential \
      --include=systemd,systemd-sysv,runc,iptables,conntrack,iproute2,util-linux,mount,kmod,procps,mawk,ca-certificates,libseccomp2 \
      --hook-dir=/usr/share/mmdebstrap/hooks/merged-usr \
      --dpkgopt='path-exclude=/usr/share/man/*' \
      --dpkgopt='path-exclude=/usr/share/doc/*' \
      --dpkgopt='path-include=/usr/share/doc/*/copyright' \
      bookworm "$rootfs" \
      "deb http://deb.debian.org/debian bookworm main" \
      "deb http://deb.debian.org/debian bookworm-updates main" \
      "deb http://deb.debian.org/debian-security bookworm-security main" >"$work/mmdebstrap.log" 2>&1; then
    cat "$work/mmdebstrap.log" >&2
    return 1
  fi

  # Before our binaries go in: kube-proxy needs only the Debian packages.
  log "kube-proxy image: the Debian root filesystem (iptables, conntrack) with kube-proxy"
  local proxy_ref
  proxy_ref=$(kubeadm_image kube-proxy)
  install -m 0755 "$bins/kube-proxy" "$rootfs/usr/local/bin/kube-proxy"
  tar -C "$rootfs" --numeric-owner -cf "$work/proxy-rootfs.tar" .
  rm "$rootfs/usr/local/bin/kube-proxy"
  python3 "$root/hack/images/oci_archive.py" --out "$images/kube-proxy.tar" --ref "$proxy_ref" \
    --layer-tar "$work/proxy-rootfs.tar" --env PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin >/dev/null
  rm "$work/proxy-rootfs.tar"

  log "kind's node files ($kind_version) and our binaries"
  install -m 0755 "$kind_files/usr/local/bin/entrypoint" "$rootfs/usr/local/bin/entrypoint"
  install -d "$rootfs/kind/bin" "$rootfs/etc/systemd/system/kubelet.service.d" "$rootfs/etc/kubernetes/manifests" \
    "$rootfs/opt/cni/bin" "$rootfs/etc/cni/net.d" "$rootfs/kind/images"
  install -m 0755 "$kind_files"/kind/bin/*.sh "$rootfs/kind/bin/"
  install -m 0644 "$kind_files"/etc/systemd/system/{kubelet.service,kubelet.slice,undo-mount-hacks.service} "$rootfs/etc/systemd/system/"
  install -m 0644 "$kind_files"/etc/systemd/system/kubelet.service.d/* "$rootfs/etc/systemd/system/kubelet.service.d/"
  install -m 0644 "$kind_files"/etc/sysctl.d/* "$rootfs/etc/sysctl.d/"
  install -m 0644 "$kind_files/etc/default/kubelet" "$rootfs/etc/default/kubelet"
  install -m 0644 "$here"/node/{containerd.service,import-images.service,pod-network.service} "$rootfs/etc/systemd/system/"
  install -d "$rootfs/etc/containerd"
  sed "s|@SANDBOX@|$sandbox|" "$here/node/config.toml" > "$rootfs/etc/containerd/config.toml"
  install -D -m 0644 "$here/node/pod-network.conflist" "$rootfs/usr/local/share/trainium-dra/pod-network.conflist"
  install -m 0644 "$here/node/node-reader.yaml" "$rootfs/usr/local/share/trainium-dra/node-reader.yaml"
  install -m 0755 "$here/node/pod-network.sh" "$rootfs/usr/local/bin/pod-network"
  install -m 0755 "$containerd_dir"/{containerd,containerd-shim-runc-v2,ctr} "$rootfs/usr/local/bin/"
  install -m 0755 "$bins"/{kubelet,kubeadm,kubectl} "$rootfs/usr/bin/"
  install -m 0755 "$cni_dir"/* "$rootfs/opt/cni/bin/"
  echo "$k8s_version" > "$rootfs/kind/version"

  # Boot only what a node needs, as kind's base image does.
  rm -f "$rootfs"/lib/systemd/system/multi-user.target.wants/* "$rootfs"/etc/systemd/system/*.wants/* \
    "$rootfs"/lib/systemd/system/local-fs.target.wants/* "$rootfs"/lib/systemd/system/basic.target.wants/* \
    "$rootfs"/lib/systemd/system/sockets.target.wants/*udev* "$rootfs"/lib/systemd/system/sockets.target.wants/*initctl*
  rm -f "$rootfs/lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service"
  echo "ReadKMsg=no" >> "$rootfs/etc/systemd/journald.conf"
  chroot "$rootfs" systemctl enable containerd.service import-images.service pod-network.service kubelet.service undo-mount-hacks.service >&2
  chroot "$rootfs" systemctl mask systemd-binfmt.service >&2

  log "control-plane images from our static binaries"
  for name in kube-apiserver kube-controller-manager kube-scheduler etcd; do
    local bin="$bins/$name"
    [ "$name" = etcd ] && bin="$bins/etcd-$etcd_version"
    python3 "$root/hack/images/oci_archive.py" --out "$images/$name.tar" --ref "$(kubeadm_image "$name")" \
      --file "$bin:/usr/local/bin/$name:0755" --env PATH=/usr/local/bin >/dev/null
  done
  cp "$pause_archive" "$images/pause.tar"
  install -m 0644 "$images"/*.tar "$rootfs/kind/images/"

  log "packing $ref"
  tar -C "$rootfs" --numeric-owner -cf "$work/rootfs.tar" .
  python3 "$root/hack/images/oci_archive.py" --out "$archive.partial" --ref "$ref" \
    --layer-tar "$work/rootfs.tar" --env container=docker \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
    --entrypoint '["/usr/local/bin/entrypoint", "/sbin/init"]' >/dev/null
  mv "$archive.partial" "$archive"
}

# The name kubeadm gives image $1 for this Kubernetes version.
kubeadm_image() {
  "$bins/kubeadm" config images list --kubernetes-version "$k8s_version" 2>/dev/null | grep -E "/$1:" | head -1
}

started=$SECONDS
if [ ! -f "$archive" ]; then
  build
  # Older node images are not used again: each is a few hundred MB.
  find "$cache/kind" -maxdepth 1 -name 'node-*.tar' ! -name "node-$key.tar" -delete
  "$provider" images --format '{{.Repository}}:{{.Tag}}' | grep -E '^localhost/trainium-dra/kind-node:' |
    grep -vxF "$ref" | xargs -r "$provider" rmi >/dev/null 2>&1 || true
fi
if ! "$provider" image inspect "$ref" >/dev/null 2>&1; then
  log "loading $archive into $provider"
  "$provider" load -i "$archive" >&2
  "$provider" image inspect "$ref" >/dev/null
fi
log "done in $((SECONDS - started))s"
echo "$ref"
