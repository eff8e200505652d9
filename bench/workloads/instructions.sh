#!/usr/bin/env bash
# Instructions per malloc and per free on the same-thread patterns (pairs, classes),
# counted by callgrind under glibc, jemalloc, tcmalloc, mimalloc and achunk. Unlike a
# time on a shared VM, the count is the same every run, so a fast path's cost can be
# checked against a target. Only the instructions inside malloc and free (and what they
# call) are counted; each pattern runs at two scales and the difference is divided by the
# difference in calls, so start-up and first-call set-up cancel out.
#
# Usage: bench/workloads/instructions.sh [build-dir]   (default: build)
#   EXTRA="name=/path/to/lib.so ..."  more allocators to count (e.g. another achunk build)
#   ONLY="achunk ..."                 count only these
#   LIMITS="malloc=N free=N"          exit 1 if achunk's count per malloc or per free, on
#                                     either pattern, is above N (a test holds it there)
# Prints a Markdown table: instructions per malloc / per free, and the pair's total.
set -euo pipefail

build=$(cd "${1:-build}" && pwd)
bin="$build/bench/achunk_workloads"
[[ -x $bin ]] || { echo "instructions.sh: $bin not built" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind missing (scripts/setup-deps.sh)" >&2; exit 1; }

# shellcheck source=allocators.sh
source "$(dirname "$0")/allocators.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Calls of malloc (and of free) a pattern makes at `scale`, from achunk_workloads.cc:
# pairs: 9 sizes x 8 objects per round; classes: 35 sizes per round; 100,000 rounds at 1.
calls() {
  local per_round
  case $1 in
    pairs) per_round=72 ;;
    classes) per_round=35 ;;
  esac
  awk -v s="$2" -v k="$per_round" 'BEGIN { r = int(100000 * s); if (r < 1) r = 1; print r * k }'
}

# Instructions executed inside `fn` (inclusive) for one run.
count() {
  local preload=$1 fn=$2 pattern=$3 scale=$4 out="$tmp/cg.out"
  LD_PRELOAD=$preload valgrind --tool=callgrind --callgrind-out-file="$out" \
    --collect-atstart=no --toggle-collect="$fn" "$bin" "$pattern" "$scale" >/dev/null 2>&1
  awk '/^summary:/ { print $2 }' "$out"
}

echo "| allocator | pairs: malloc | pairs: free | pairs: both | classes: malloc | classes: free | classes: both |"
echo "|---|---|---|---|---|---|---|"
failed=0
for i in "${!names[@]}"; do
  if [[ -n ${ONLY:-} && " $ONLY " != *" ${names[$i]} "* ]]; then continue; fi
  row="| ${names[$i]} |"
  for pattern in pairs classes; do
    both=0
    for fn in malloc free; do
      lo=$(count "${preload[$i]}" "$fn" "$pattern" 0.02)
      hi=$(count "${preload[$i]}" "$fn" "$pattern" 0.04)
      per=$(awk -v a="$lo" -v b="$hi" -v ca="$(calls "$pattern" 0.02)" \
        -v cb="$(calls "$pattern" 0.04)" 'BEGIN { printf "%.1f", (b - a) / (cb - ca) }')
      both=$(awk -v x="$both" -v y="$per" 'BEGIN { printf "%.1f", x + y }')
      row+=" $per |"
      for limit in ${LIMITS:-}; do
        if [[ ${names[$i]} == achunk && ${limit%%=*} == "$fn" ]] &&
          awk -v x="$per" -v m="${limit#*=}" 'BEGIN { exit !(x > m) }'; then
          echo "instructions.sh: achunk's $fn on $pattern takes $per instructions, above $limit" >&2
          failed=1
        fi
      done
    done
    row+=" $both |"
  done
  echo "$row"
done
exit "$failed"
