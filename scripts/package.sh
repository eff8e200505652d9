#!/usr/bin/env bash
# Builds achunk's Debian packages with CPack (packaging/CMakeLists.txt): a Release build
# for /usr with no tests and no benchmarks, then libachunk-malloc0, libachunk-dev and
# achunk-tools. Prints the paths of the .deb files, one a line, on stdout (the build's
# output goes to stderr). Install them with
#   apt install ./libachunk-malloc0_*.deb ./achunk-tools_*.deb
# Needs dpkg-shlibdeps (package dpkg-dev; scripts/setup-deps.sh installs it).
# Usage: scripts/package.sh [build dir]   (default: build-pkg in the source tree)
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
dir=${1:-$src/build-pkg}

for tool in cmake ninja cpack dpkg-shlibdeps file; do
  command -v "$tool" >/dev/null ||
    { echo "package.sh: $tool is missing (scripts/setup-deps.sh installs it)" >&2; exit 1; }
done

cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX=/usr \
  -DACHUNK_BUILD_TESTS=OFF -DACHUNK_BUILD_BENCH=OFF >&2
cmake --build "$dir" -j "$(nproc)" >&2
dir=$(cd "$dir" && pwd)
# Only this run's packages are printed: an older version's would otherwise be listed too.
rm -f "$dir"/*.deb
(cd "$dir" && cpack -G DEB >&2)
ls "$dir"/*.deb
