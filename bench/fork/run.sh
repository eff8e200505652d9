#!/usr/bin/env bash
# The fork matrix: forks per second of achunk_fork_bench's shapes (fork per request with a
# small and a 1 GiB parent, a child that exits at once, fork+exec from a threaded parent)
# under glibc, jemalloc, tcmalloc, mimalloc and achunk (libachunk_malloc.so), the order of
# allocators rotated each round. Prints, per shape, each allocator's median forks/s and its
# ratio to glibc's (the median of the ratios within each round), and the page faults per
# fork of the exit shape (perf, when it is there).
# Usage: bench/fork/run.sh [build-dir]
#   ROUNDS=5 SECONDS_EACH=2 SHAPES="request:small request:large exit:small exec:small"
#   EXTRA="name=/path/to/lib.so ..."  more allocators (e.g. achunk with ACHUNK_CONF below)
#   CONF="release_interval_ms:0"       ACHUNK_CONF for every run (default: the drop-in's)
# Packages: scripts/setup-deps.sh (libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
bin=$build/bench/achunk_fork_bench
rounds=${ROUNDS:-5}
secs=${SECONDS_EACH:-2}
shapes=${SHAPES:-"request:small request:large exit:small exec:small"}
[[ -x $bin ]] || { echo "run.sh: $bin not built (ninja -C $build achunk_fork_bench)" >&2; exit 1; }

# shellcheck source=../workloads/allocators.sh
source "$root/bench/workloads/allocators.sh"
n=${#names[@]}

raw=$(mktemp)
trap 'rm -f "$raw"' EXIT
for ((r = 0; r < rounds; r++)); do
  for shape in $shapes; do
    for ((k = 0; k < n; k++)); do
      i=$(((k + r) % n))
      line=$(env ${preload[i]:+LD_PRELOAD=${preload[i]}} ACHUNK_CONF="${CONF:-}" \
        "$bin" "${shape%%:*}" "${shape#*:}" "$secs")
      rate=$(awk '{ print $3 }' <<<"$line")
      printf '%s\t%s\t%s\t%s\n' "$shape" "${names[i]}" "$r" "$rate" >>"$raw"
      echo "round $r: $shape ${names[i]} $rate forks/s" >&2
    done
  done
done

echo
echo "forks/s, median of $rounds rounds (ratio to glibc: median of the same-round ratios)"
printf '%-14s' shape
for name in "${names[@]}"; do printf ' %18s' "$name"; done
echo
for shape in $shapes; do
  printf '%-14s' "$shape"
  for name in "${names[@]}"; do
    awk -F'\t' -v s="$shape" -v a="$name" '
      $1 == s && $2 == "glibc" { g[$3] = $4 }
      $1 == s && $2 == a { v[$3] = $4 }
      function median(arr, n,   i, j, t, k, x) {
        k = 0; for (i in arr) x[++k] = arr[i]
        for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
        return k % 2 ? x[(k + 1) / 2] : (x[k / 2] + x[k / 2 + 1]) / 2
      }
      END {
        for (r in v) ratio[r] = v[r] / g[r]
        printf " %8.0f (%5.2fx)", median(v), median(ratio)
      }' "$raw"
  done
  echo
done

if command -v perf >/dev/null && perf stat -e page-faults true >/dev/null 2>&1; then
  echo
  echo "page faults per fork, exit:small (parent and children together; parent alone)"
  per_fork() {  # $1: allocator index, $2: perf's -i (the parent alone) or nothing
    local out forks faults
    out=$(env ${preload[$1]:+LD_PRELOAD=${preload[$1]}} ACHUNK_CONF="${CONF:-}" \
      perf stat ${2:+"$2"} -x, -e page-faults -- "$bin" exit small "$secs" 2>&1)
    forks=$(awk '/forks\/s/ { print $5 }' <<<"$out")
    faults=$(awk -F, '/page-faults/ { print $1 }' <<<"$out")
    awk -v a="$faults" -v b="$forks" 'BEGIN { printf "%.1f", a / b }'
  }
  for ((i = 0; i < n; i++)); do
    printf '%-10s %6s %6s\n' "${names[i]}" "$(per_fork "$i" "")" "$(per_fork "$i" -i)"
  done
fi
