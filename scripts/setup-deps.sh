#!/usr/bin/env bash
# Installs the Debian packages achunk builds, tests and benchmarks with.
# Idempotent: only missing packages are installed; works as root or through sudo.
# Usage: scripts/setup-deps.sh [extra-package ...]
set -euo pipefail

PACKAGES=(cmake ninja-build g++ libgtest-dev libgmock-dev libbenchmark-dev libabsl-dev
  libjemalloc-dev pkgconf
  # scripts/fuzz.sh and the fuzz tests: libFuzzer and the sanitizers of clang.
  clang-14 libclang-rt-14-dev
  # bench/workloads/run.sh: the peer allocators it preloads, /usr/bin/time, the chart
  # (gnuplot also draws achunk-dump --plot).
  libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 time gnuplot-nox
  # bench/workloads/instructions.sh: instruction counts of the fast paths.
  valgrind
  # scripts/package.sh and the install.deb test: dpkg-shlibdeps (dpkg-dev) and file for
  # the Debian packages' dependencies, man-db for man -w, and the private MariaDB the test
  # runs under the installed drop-in (bench/sysbench/server.sh).
  dpkg-dev file man-db mariadb-server mariadb-client "$@")

missing=()
for pkg in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null || true)
  [[ "$status" == "install ok installed" ]] || missing+=("$pkg")
done
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ $(id -u) -eq 0 ]]; then
  sudo_cmd=()
elif command -v sudo >/dev/null 2>&1; then
  sudo_cmd=(sudo -n)
else
  echo "setup-deps: missing packages (${missing[*]}) and neither root nor sudo is available" >&2
  exit 1
fi

echo "setup-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# mariadb-server's postinst would start (and enable) the system's MariaDB; the tests and
# benchmarks start private servers only. The standard way to keep a package's scripts
# from starting services: a policy-rc.d that answers 101 (action forbidden), here only
# for the time of the install and only if the machine has none of its own.
policy=/usr/sbin/policy-rc.d
if [[ ! -e $policy ]]; then
  trap '"${sudo_cmd[@]}" rm -f "$policy"' EXIT
  trap 'exit 130' INT
  trap 'exit 143' TERM
  printf '#!/bin/sh\n# scripts/setup-deps.sh: no service starts while it installs\nexit 101\n' |
    "${sudo_cmd[@]}" tee "$policy" >/dev/null
  "${sudo_cmd[@]}" chmod 755 "$policy"
fi
# A stale package index makes apt-get install fail with 404s, so refresh first.
"${sudo_cmd[@]}" apt-get update -qq
"${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
