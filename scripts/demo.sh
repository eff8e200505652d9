#!/usr/bin/env bash
# The main job: installs dependencies, builds Release into build/, and runs the
# burst-then-quiet scenario under three chunk-cache settings, printing a table and the
# [chunk_mgr] dump of each run, then the memory-context request loop with the thread page
# manager on and off. Takes under 2 minutes; --quick scales every time down.
# Usage: scripts/demo.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target achunk_burst_quiet achunk_context_demo achunk_malloc
build/bench/achunk_burst_quiet "$@"
build/bench/achunk_context_demo "$@"
