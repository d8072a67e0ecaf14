#!/usr/bin/env bash
# Machine-level prerequisites of the test suite (run as root, or with sudo): Go to build the Kubernetes
# components, PostgreSQL server binaries for the Database operator's real replication test, and what the
# local cluster's real nodes need: containerd + runc, the CNI plugins, iptables, mmdebstrap (images are
# built from the Debian mirror apt uses), gcc (the pause binary) and xfsprogs (volumes).
set -euo pipefail
export PATH="$PATH:/usr/local/go/bin"
if ! command -v go >/dev/null; then
  echo "error: Go 1.24+ is required to build the control plane; install it from https://go.dev/doc/install" >&2
  exit 1
fi
# kubectl: tests and the demo show objects with it, as users would. This machine kind ships it.
if ! command -v kubectl >/dev/null; then
  echo "error: kubectl is required (https://kubernetes.io/docs/tasks/tools/); install it and run again" >&2
  exit 1
fi
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  echo "installing PostgreSQL (Debian packages) ..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
# Real nodes (@opkit/controlplane realNodes / opkit cluster up --real-nodes).
node_pkgs=()
command -v containerd >/dev/null || node_pkgs+=(containerd)
command -v runc >/dev/null || node_pkgs+=(runc)
[ -x /usr/lib/cni/bridge ] || node_pkgs+=(containernetworking-plugins)
command -v iptables >/dev/null || node_pkgs+=(iptables)
command -v mmdebstrap >/dev/null || node_pkgs+=(mmdebstrap)
command -v gcc >/dev/null || node_pkgs+=(gcc)
[ -f /usr/lib/x86_64-linux-gnu/libc.a ] || [ -f /usr/lib/aarch64-linux-gnu/libc.a ] || node_pkgs+=(libc6-dev)
command -v nsenter >/dev/null || node_pkgs+=(util-linux)
command -v ip >/dev/null || node_pkgs+=(iproute2)
# Volumes of real nodes: loop-mounted XFS files (xfs_growfs grows them online without CAP_SYS_RESOURCE).
command -v mkfs.xfs >/dev/null || node_pkgs+=(xfsprogs)
# nm and readelf: the benchmark's binary-residency.ts (which of Node's pages are resident, by symbol).
command -v nm >/dev/null && command -v readelf >/dev/null || node_pkgs+=(binutils)
if [ ${#node_pkgs[@]} -gt 0 ]; then
  echo "installing what real nodes need: ${node_pkgs[*]} ..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${node_pkgs[@]}" >/dev/null
fi
echo "system packages: ok ($(go version | cut -d' ' -f3), kubectl, $(ls -d /usr/lib/postgresql/*/ | head -1), $(containerd --version | cut -d' ' -f3) + runc)"
