#!/usr/bin/env bash
# Installs the Debian 12 packages sbx needs to build and test -- only the missing ones.
# Uses sudo when not root. Safe to run again: it does nothing when everything is present.
set -euo pipefail

packages=(
  # build
  build-essential cmake pkg-config git clang clang-format
  # contract codecs
  protobuf-compiler protobuf-c-compiler libprotobuf-c-dev nanopb libnanopb-dev
  # libraries
  libcurl4-openssl-dev libnghttp2-dev libssl-dev libyaml-dev libjansson-dev libseccomp-dev
  libnats-dev
  # tests: unit framework, fake cloud servers, independent encoder and gRPC client
  libcmocka-dev libmicrohttpd-dev python3 python3-protobuf python3-grpcio python3-grpc-tools
  python3-prometheus-client
  # tests: the Python client installed from sdk/python with pip into a venv
  python3-venv python3-pip python3-setuptools python3-wheel
  # tests: real peers and parts
  docker.io busybox-static haproxy bubblewrap nghttp2-client libgrpc++-dev protobuf-compiler-grpc
  # bench/worker: the gRPC C++ peer and load generator (grpc++.pc requires protobuf.pc)
  libprotobuf-dev
  iproute2 procps openssl uidmap nats-server
  # tests: sbx-agent under memcheck (tests/local/test_local_agent_valgrind.c)
  valgrind
)

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages present"
  exit 0
fi

sudo=()
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "install-deps: need root or sudo to install: ${missing[*]}" >&2; exit 1; }
  sudo=(sudo)
fi
echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq
"${sudo[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}"
