#!/usr/bin/env bash
# The main job: installs dependencies, builds Release into build/, and runs the
# burst-then-quiet scenario under three chunk-cache settings, printing a table and the
# [chunk_mgr] dump of each run, then the memory-context request loop with the thread page
# manager on and off. Each setting is recorded through its stats region (achunk-dump
# --watch, every 500 ms) into build/demo/, and gnuplot draws build/demo/timeline.png.
# Takes under 2 minutes; --quick scales every time down.
# Usage: scripts/demo.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup-deps.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)" --target achunk_burst_quiet achunk_context_demo achunk_malloc \
  achunk-dump
mkdir -p build/demo
build/bench/achunk_burst_quiet "$@" --record build/demo --dump-tool build/tools/dump/achunk-dump
gnuplot build/demo/timeline.gp
echo "timeline: build/demo/timeline.png (samples in build/demo/*.jsonl)"
build/bench/achunk_context_demo "$@"
