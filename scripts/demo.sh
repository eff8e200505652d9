#!/usr/bin/env bash
# The main job: installs dependencies, builds Release into build/, and runs the
# burst-then-quiet scenario under three chunk-cache settings, printing a table and the
# [chunk_mgr] dump of each run. Takes about 3 minutes; --quick scales every time down.
# Usage: scripts/demo.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target achunk_burst_quiet
exec build/bench/achunk_burst_quiet "$@"
