#!/usr/bin/env bash
# Installs the Debian packages sagad builds and tests with (only what is missing).
set -euo pipefail
pkgs=(build-essential cmake pkg-config libboost-dev liblmdb-dev libcpp-httplib-dev
      nlohmann-json3-dev libgtest-dev libssl-dev libjemalloc-dev ccache curl jq prometheus
      libpq-dev libre2-dev postgresql-15 chromium chromium-driver python3-selenium clang clang-format
      json-schema-test-suite python3-jsonschema python3-venv iproute2)
missing=()
for p in "${pkgs[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "installing: ${missing[*]}" >&2
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
