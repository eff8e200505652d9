#!/usr/bin/env bash
# Installs the build tree into a scratch prefix, then builds and runs a CMake consumer
# (find_package(achunk)) and a C program built with pkg-config against it.
# Usage: run.sh <source dir> <build dir>
set -euo pipefail
src=$1
build=$2
prefix=$(mktemp -d)
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null
test -f "$prefix"/lib*/libachunk_malloc.so || test -n "$(find "$prefix" -name libachunk_malloc.so)"
cmake -S "$src/tests/install/consumer" -B "$prefix/consumer" -G Ninja \
  -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build "$prefix/consumer" >/dev/null
"$prefix/consumer/consumer"
pcdir=$(dirname "$(find "$prefix" -name achunk.pc)")
libdir=$(dirname "$(find "$prefix" -name 'libachunk.so' | head -n 1)")
# prefix set outright: --define-prefix guesses it two levels above the .pc file, which
# misses by one under a multiarch libdir (lib/x86_64-linux-gnu/pkgconfig with /usr).
cc "$src/tests/install/consumer/main.c" -o "$prefix/c_consumer" \
  $(PKG_CONFIG_PATH="$pcdir" pkg-config --define-variable=prefix="$prefix" --cflags --libs achunk)
LD_LIBRARY_PATH="$libdir" "$prefix/c_consumer"
