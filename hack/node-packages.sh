#!/usr/bin/env bash
# The Debian packages only the real-node cluster calls, installed when missing
# (as root; otherwise it names them and fails): runc (Debian's build works on
# these cgroup-v1 hosts and needs no cgo toolchain); iptables (kube-proxy and
# the CNI bridge/portmap plugins call it, the real-node tests call
# iptables-save); conntrack (kube-proxy); ip (the nodes' network namespaces);
# ps (the real-node tests). `make demo` starts no real node and never runs this.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=lib/debian-packages.sh
. "$here/lib/debian-packages.sh"
install_missing "the real-node cluster" runc iptables iptables-save:iptables conntrack \
  ip:iproute2 ps:procps
