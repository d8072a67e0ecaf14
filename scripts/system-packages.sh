#!/usr/bin/env bash
# Machine-level prerequisites of the test suite (run as root, or with sudo): Go to build the Kubernetes
# components, and PostgreSQL server binaries for the Database operator's real replication test.
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
echo "system packages: ok ($(go version | cut -d' ' -f3), kubectl, $(ls -d /usr/lib/postgresql/*/ | head -1))"
