#!/usr/bin/env bash
# Instructions per malloc and per free on the same-thread patterns (pairs, classes), and
# per operator new and sized delete on newdel, counted by callgrind under glibc,
# jemalloc, tcmalloc, mimalloc and achunk. Unlike a time on a shared VM, the count is the
# same every run, so a fast path's cost can be checked against a target. Only the instructions inside those functions (and what they
# call) are counted; each pattern runs at two scales and the difference is divided by the
# difference in calls, so start-up and first-call set-up cancel out.
#
# A last table counts the replacement patterns' slow paths the same way: instructions
# per step of the whole program (a free and a malloc, malloc_usable_size for usable,
# posix_memalign instead of malloc for aligned, and the benchmark's own work, which is the
# same under every allocator).
#
# Usage: bench/workloads/instructions.sh [build-dir]   (default: build)
#   EXTRA="name=/path/to/lib.so ..."  more allocators to count (e.g. another achunk build)
#   ONLY="achunk ..."                 count only these
#   STEPS="replace1 ..."              the replacement patterns of the second table
#                                     (default: replace1 replace2 usable aligned; empty:
#                                     none)
#   LIMITS="malloc=N free=N new=N delete=N replace1=N ..."
#                                     exit 1 if achunk's count per call of that function,
#                                     on any pattern, or per step of a pattern in STEPS,
#                                     is above N (a test holds it there); "free@classes=N"
#                                     sets one pattern's limit for a function
# Prints Markdown tables: instructions per call and the pair's total, and instructions
# per step.
# achunk's work that follows the clock, not the calls, is held off (ACHUNK_CONF below):
# the housekeeping thread's looks, span washing, chunk expiry and the stats region's
# refresh run by elapsed time, and under callgrind a loaded machine stretches that time,
# so with the defaults the same code counted 207-219 a step of replace1 from run to run.
# The thread still starts, as it does by default, its interval longer than any run.
set -euo pipefail
export ACHUNK_CONF="release_interval_ms:600000,span_idle_ms:-1,chunk_cache_ttl_ms:-1,stats_region:false"

build=$(cd "${1:-build}" && pwd)
bin="$build/bench/achunk_workloads"
[[ -x $bin ]] || { echo "instructions.sh: $bin not built" >&2; exit 1; }
command -v valgrind >/dev/null || { echo "instructions.sh: valgrind missing (scripts/setup-deps.sh)" >&2; exit 1; }

# shellcheck source=allocators.sh
source "$(dirname "$0")/allocators.sh"

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Calls of malloc (and of free) a pattern makes at `scale`, from achunk_workloads.cc:
# pairs and newdel: 9 sizes x 8 objects per round; classes: 35 sizes per round; 100,000
# rounds at 1.
calls() {
  local per_round
  case $1 in
    pairs | newdel) per_round=72 ;;
    classes) per_round=35 ;;
  esac
  awk -v s="$2" -v k="$per_round" 'BEGIN { r = int(100000 * s); if (r < 1) r = 1; print r * k }'
}

# Steps of a replacement pattern at `scale` (its live set is filled the same at every
# scale): replace1/replace2/aligned 2,000,000 and usable 4,000,000 at 1.
steps() {
  local per
  case $1 in
    replace1 | replace2 | aligned) per=2000000 ;;
    usable) per=4000000 ;;
    *) echo "instructions.sh: no step count for '$1'" >&2; exit 2 ;;
  esac
  awk -v s="$2" -v k="$per" 'BEGIN { n = int(k * s); if (n < 1) n = 1; print n }'
}

# Instructions executed inside `fn` (inclusive; names separated by "|" for a function
# some allocators name otherwise) for one run; the whole program without.
count() {
  local preload=$1 fn=$2 pattern=$3 scale=$4 out="$tmp/cg.out" name
  local toggle=(--collect-atstart=no)
  local -a names_of_fn
  IFS='|' read -ra names_of_fn <<<"$fn"
  for name in "${names_of_fn[@]}"; do toggle+=(--toggle-collect="$name"); done
  [[ -z $fn ]] && toggle=()
  LD_PRELOAD=$preload valgrind --tool=callgrind --callgrind-out-file="$out" \
    "${toggle[@]}" "$bin" "$pattern" "$scale" >/dev/null 2>&1
  awk '/^summary:/ { print $2 }' "$out"
}

# Exit status 1 (and a line) when achunk's `per` is above the limit named `key`, or
# `key@pattern` when LIMITS names one (it then wins).
over_limit() {
  local name=$1 key=$2 per=$3 what=$4 pattern=${5:-} limit chosen=""
  [[ $name == achunk ]] || return 1
  for limit in ${LIMITS:-}; do
    [[ ${limit%%=*} == "$key" && -z $chosen ]] && chosen=$limit
    [[ -n $pattern && ${limit%%=*} == "$key@$pattern" ]] && chosen=$limit
  done
  if [[ -n $chosen ]] && awk -v x="$per" -v m="${chosen#*=}" 'BEGIN { exit !(x > m) }'; then
    echo "instructions.sh: achunk's $what takes $per instructions, above $chosen" >&2
    return 0
  fi
  return 1
}

included() {
  [[ -z ${ONLY:-} || " $ONLY " == *" $1 "* ]]
}

# Instructions per unit of allocator i inside `fn` ("" for the whole program) on
# `pattern`: the runs at 0.02 and 0.04 apart, over the units `unit` (calls or steps)
# counts at each.
per_unit() {
  local i=$1 fn=$2 pattern=$3 unit=$4 lo hi
  lo=$(count "${preload[$i]}" "$fn" "$pattern" 0.02)
  hi=$(count "${preload[$i]}" "$fn" "$pattern" 0.04)
  awk -v a="$lo" -v b="$hi" -v ca="$($unit "$pattern" 0.02)" -v cb="$($unit "$pattern" 0.04)" \
    'BEGIN { printf "%.1f", (b - a) / (cb - ca) }'
}

# A Markdown table's first two lines, for the columns "$@" after "allocator".
table_head() {
  local header="| allocator |" rule="|---|" column
  for column in "$@"; do
    header+=" $column |"
    rule+="---|"
  done
  echo "$header"
  echo "$rule"
}

# One row per allocator: for each pattern named in "$@" (as "pattern:fn1 fn2"), the
# instructions per call of each function (calls as counted by `calls`), then their sum.
per_call_table() {
  local spec pattern fn
  local -a columns=()
  for spec in "$@"; do
    pattern=${spec%%:*}
    for fn in ${spec#*:}; do columns+=("$pattern: $fn"); done
    columns+=("$pattern: both")
  done
  table_head "${columns[@]}"
  for i in "${!names[@]}"; do
    included "${names[$i]}" || continue
    local row="| ${names[$i]} |"
    for spec in "$@"; do
      pattern=${spec%%:*}
      local both=0
      for fn in ${spec#*:}; do
        per=$(per_unit "$i" "${FN_NAME[$fn]:-$fn}" "$pattern" calls)
        both=$(awk -v x="$both" -v y="$per" 'BEGIN { printf "%.1f", x + y }')
        row+=" $per |"
        if over_limit "${names[$i]}" "$fn" "$per" "$fn on $pattern" "$pattern"; then failed=1; fi
      done
      row+=" $both |"
    done
    echo "$row"
  done
}

# callgrind's names for the C++ entry points: tcmalloc and mimalloc define them as
# aliases, and callgrind may report any name of the address (newdel calls no array form).
declare -A FN_NAME=(
  [new]="operator new(unsigned long)|operator new[](unsigned long)|tc_new|mi_new"
  [delete]="operator delete(void*, unsigned long)|operator delete[](void*, unsigned long)|tc_delete_sized|mi_free_size"
)

failed=0
per_call_table "pairs:malloc free" "classes:malloc free"
echo
per_call_table "newdel:new delete"

step_patterns=${STEPS-replace1 replace2 usable aligned}
if [[ -n $step_patterns ]]; then
  echo
  columns=()
  for pattern in $step_patterns; do columns+=("$pattern: per step"); done
  table_head "${columns[@]}"
  for i in "${!names[@]}"; do
    included "${names[$i]}" || continue
    row="| ${names[$i]} |"
    for pattern in $step_patterns; do
      per=$(per_unit "$i" "" "$pattern" steps)
      row+=" $per |"
      if over_limit "${names[$i]}" "$pattern" "$per" "step of $pattern"; then failed=1; fi
    done
    echo "$row"
  done
fi
exit "$failed"
