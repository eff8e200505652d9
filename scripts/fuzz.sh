#!/usr/bin/env bash
# Builds achunk's libFuzzer targets with clang (ASan+UBSan) and runs each for a while.
#   scripts/fuzz.sh [seconds] [malloc|options ...]   (default: 300 s each, both targets)
#   scripts/fuzz.sh --build                          (build only)
# The build goes to $ACHUNK_FUZZ_DIR (default build-fuzz); each target keeps its corpus
# there (corpus-NAME) between runs. Crash inputs land in the current directory.
set -euo pipefail
src=$(cd "$(dirname "$0")/.." && pwd)
dir=${ACHUNK_FUZZ_DIR:-$src/build-fuzz}
cxx=$(command -v clang++-14 || command -v clang++ || true)
if [[ -z "$cxx" ]]; then
  echo "fuzz.sh: clang++ not found (scripts/setup-deps.sh installs clang-14)" >&2
  exit 1
fi

build() {
  # clang's default constexpr step limit is too low for the chunk registry's constinit
  # bitmaps; clang 14 needs std::source_location supplied (clang_source_location.h).
  cmake -S "$src" -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_COMPILER="$cxx" \
    -DCMAKE_CXX_FLAGS="-fconstexpr-steps=268435456 -include $src/tests/fuzz/clang_source_location.h" -DACHUNK_SANITIZER=fuzzer-no-link,address,undefined \
    -DACHUNK_FUZZ=ON -DACHUNK_BUILD_TESTS=OFF -DACHUNK_BUILD_BENCH=OFF >/dev/null
  cmake --build "$dir" -j "$(nproc)" --target achunk_malloc_fuzzer achunk_options_fuzzer
}

if [[ "${1:-}" == "--build" ]]; then
  build
  exit 0
fi
seconds=${1:-300}
shift || true
targets=("$@")
[[ ${#targets[@]} -eq 0 ]] && targets=(malloc options)
[[ "${ACHUNK_FUZZ_SKIP_BUILD:-0}" == 1 ]] || build
for t in "${targets[@]}"; do
  corpus="$dir/corpus-$t"
  mkdir -p "$corpus"
  echo "=== fuzz $t: ${seconds}s ==="
  # rss_limit bounds the malloc target's big objects; ACHUNK_CONF= keeps a caller's
  # options out of the run.
  ACHUNK_CONF= ASAN_OPTIONS=abort_on_error=1:detect_leaks=1 UBSAN_OPTIONS=halt_on_error=1 \
    "$dir/tests/fuzz/achunk_${t}_fuzzer" -max_total_time="$seconds" -max_len=4096 \
    -rss_limit_mb=4096 -print_final_stats=1 "$corpus"
done
echo "=== fuzz: no failures (${targets[*]}) ==="
