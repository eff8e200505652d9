#!/usr/bin/env bash
# oltp_point_select alone under each allocator setting, the order rotated each round: a
# private MariaDB server (server.sh), cold for each setting, WARM_S seconds of
# point_select to fill its buffer pool, then POINT_S seconds measured. run.sh's
# point_select follows a read_write run and an idle window, 20-30 s of it, which this VM
# spreads by a fifth; this gives the read-only path rounds of its own. Prints each
# round's QPS and, per setting, the median of its same-round ratios to glibc's.
# Usage: bench/sysbench/point_select.sh
#   (env: ROUNDS=4 WARM_S=15 POINT_S=20 THREADS=4
#    SETTINGS="glibc achunk_default achunk_no_thread jemalloc")
# Packages: scripts/setup-deps.sh sysbench mariadb-server libjemalloc2.
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
ROUNDS=${ROUNDS:-4}
WARM_S=${WARM_S:-15}
POINT_S=${POINT_S:-20}
THREADS=${THREADS:-4}
TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-100000}

scripts/setup-deps.sh sysbench mariadb-server libjemalloc2
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target achunk_malloc >/dev/null
ACHUNK_SO=$ROOT/build/libachunk_malloc.so
# awk reads all of ldconfig's output: an early exit would kill it with SIGPIPE.
JEMALLOC_SO=$(ldconfig -p | awk '/libjemalloc.so.2 / && !found {print $NF; found = 1}')

# shellcheck source=bench/sysbench/server.sh
source bench/sysbench/server.sh
SERVER_OPTS=(--innodb-buffer-pool-size=256M --max-connections=64)
SB_COMMON=(--db-driver=mysql --mysql-socket="$SOCK" --mysql-user=root --mysql-db=sbtest
  --tables="$TABLES" --table-size="$TABLE_SIZE" --threads="$THREADS")

start_server "" "" "${SERVER_OPTS[@]}"
mariadb --no-defaults --socket="$SOCK" -uroot -e "CREATE DATABASE IF NOT EXISTS sbtest"
sysbench oltp_read_write "${SB_COMMON[@]}" prepare >"$WORK/prepare.log"
stop_server

read -r -a SETTINGS <<<"${SETTINGS:-glibc achunk_default achunk_no_thread jemalloc}"
[[ " ${SETTINGS[*]} " == *" glibc "* ]] || { echo "point_select.sh: SETTINGS needs glibc, the ratios' base" >&2; exit 1; }
results=$WORK/qps.dat  # round setting qps
: >"$results"
for round in $(seq 1 "$ROUNDS"); do
  shift_by=$(((round - 1) % ${#SETTINGS[@]}))
  for setting in "${SETTINGS[@]:shift_by}" "${SETTINGS[@]:0:shift_by}"; do
    case $setting in
      glibc) preload=""; conf="" ;;
      jemalloc) preload=$JEMALLOC_SO; conf="" ;;
      achunk_default) preload=$ACHUNK_SO; conf="" ;;
      achunk_no_thread) preload=$ACHUNK_SO; conf="release_interval_ms:0" ;;
      *) echo "point_select.sh: unknown setting $setting" >&2; exit 1 ;;
    esac
    start_server "$preload" "$conf" "${SERVER_OPTS[@]}"
    sysbench oltp_point_select "${SB_COMMON[@]}" --time="$WARM_S" run >/dev/null
    qps=$(sysbench oltp_point_select "${SB_COMMON[@]}" --time="$POINT_S" run |
      awk '/queries:/ {gsub(/[()]/, ""); print $3}')
    stop_server
    echo "round $round: $setting $qps QPS" >&2
    echo "$round $setting $qps" >>"$results"
  done
done

echo "| setting | QPS (median) | QPS / glibc (median of same-round ratios) | range |"
echo "|---|---|---|---|"
awk '
  { qps[$1, $2] = $3; if (!($2 in seen)) { seen[$2] = 1; order[n++] = $2 } rounds[$1] = 1 }
  function median(a, k,   i, j, t) {
    for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
    return k % 2 ? a[(k + 1) / 2] : (a[k / 2] + a[k / 2 + 1]) / 2
  }
  END {
    for (s = 0; s < n; s++) {
      k = 0; delete q; delete r
      for (round in rounds) {
        q[++k] = qps[round, order[s]]
        r[k] = qps[round, order[s]] / qps[round, "glibc"]
      }
      m = median(q, k)
      lo = r[1]; hi = r[1]
      for (i = 2; i <= k; i++) { if (r[i] < lo) lo = r[i]; if (r[i] > hi) hi = r[i] }
      printf "| %s | %.0f | %.2fx | %.2f-%.2f |\n", order[s], m, median(r, k), lo, hi
    }
  }' "$results"
