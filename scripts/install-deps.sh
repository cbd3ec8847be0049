#!/usr/bin/env bash
# Installs the Debian 12 packages sbx needs to build and test -- only the missing ones.
# Uses sudo when not root. Safe to run again: it does nothing when everything is present.
set -euo pipefail

packages=(
  # build
  build-essential cmake pkg-config git clang clang-format clang-tidy cppcheck
  # contract codecs
  protobuf-compiler protobuf-c-compiler libprotobuf-c-dev nanopb libnanopb-dev
  # libraries
  libcurl4-openssl-dev libnghttp2-dev libssl-dev libyaml-dev libjansson-dev libseccomp-dev
  libnats-dev
  # tests: unit framework, fake cloud servers, independent encoder and gRPC client
  libcmocka-dev libmicrohttpd-dev python3 python3-protobuf python3-grpcio python3-grpc-tools
  python3-prometheus-client python3-yaml
  # tests: the Python client installed from sdk/python with pip into a venv
  python3-venv python3-pip python3-setuptools python3-wheel
  # tests: real peers and parts
  docker.io busybox-static haproxy bubblewrap nghttp2-client curl libgrpc++-dev
  protobuf-compiler-grpc
  # bench/worker: the gRPC C++ peer and load generator (grpc++.pc requires protobuf.pc)
  libprotobuf-dev
  iproute2 procps openssl uidmap nats-server
  # tests: sbx-agent under memcheck (tests/local/test_local_agent_valgrind.c)
  valgrind
  # tests: systemd-analyze verify of the installed unit (tests/install/install_embed.sh)
  systemd
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  sudo=(sudo)
fi
need_root() {
  [ ${#sudo[@]} -eq 0 ] || command -v sudo >/dev/null ||
    { echo "install-deps: need root or sudo to install: $*" >&2; exit 1; }
}

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
else
  need_root "${missing[@]}"
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  "${sudo[@]}" apt-get update -qq
  "${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi

# tests: generic gRPC clients from npm (server reflection and Health/Watch are proven with
# clients nobody here wrote), and the Kubernetes schema models and a YAML parser that
# tests/deploy validates deploy/kubernetes with, installed outside the source tree so nothing is
# vendored and the tests download nothing. The tests find them in $SBX_NODE_DIR (default
# /opt/sbx-test-node). One npm install of the whole list: npm prunes what its list omits.
# (kubernetes-models 4.x: 5.x needs node 22, Debian 12 has 18.)
node_dir=${SBX_NODE_DIR:-/opt/sbx-test-node}
npm_packages=(@grpc/grpc-js@1.14.7 @grpc/proto-loader@0.8.1 grpc-js-reflection-client@1.4.2
              kubernetes-models@4.5.1 yaml@2.9.1)
npm_missing=0
for p in "${npm_packages[@]}"; do
  [ -f "$node_dir/node_modules/${p%@*}/package.json" ] || npm_missing=1
done
if [ $npm_missing -eq 1 ]; then
  need_root "${npm_packages[@]}"
  if ! command -v npm >/dev/null; then
    echo "install-deps: installing nodejs npm"
    "${sudo[@]}" apt-get update -qq
    "${sudo[@]}" apt-get install -y -qq --no-install-recommends nodejs npm
  fi
  echo "install-deps: npm packages ${npm_packages[*]} into $node_dir"
  "${sudo[@]}" mkdir -p "$node_dir"
  "${sudo[@]}" npm install --prefix "$node_dir" --no-audit --no-fund --no-save "${npm_packages[@]}" >/dev/null
fi
