#!/usr/bin/env bash
# sysbench against a private MariaDB server under each allocator setting:
#   glibc | jemalloc (Debian libjemalloc2) | achunk cache 0 + no eviction (nothing given
#   back while running: the "before" of the seed) | achunk cache 2M |
#   achunk default (cache 0 = adaptive, 30 s idle eviction, free spans washed after 1 s,
#   the housekeeping thread every 1000 ms)
# For each: oltp_read_write for RUN_S seconds (QPS, p95, errors, peak RSS, minor faults and
# madvise calls per transaction, the latter through perf's syscall tracepoint), RSS every
# second through an IDLE_S idle window, then oltp_point_select for POINT_S seconds, and
# for achunk settings, at the end of the idle window while the server runs, its dump read
# with achunk-dump (into OUT/dump_SETTING_roundN.txt), the wall time of that
# `achunk-dump PID` and of one `achunk-dump --watch PID 1 1` sample (the 1 s interval
# included), and the CPU time (utime+stime) the achunk-bg housekeeping thread used over
# the idle window. A sixth setting is the
# default without the housekeeping thread (release_interval_ms:0); `achunk_before` (only
# when named in SETTINGS) runs the default with the library ACHUNK_BEFORE_SO, another
# build, so two commits meet in one run. Writes results.md and
# rss.png (gnuplot) into OUT. ROUNDS > 1 repeats everything with the order of the settings
# rotated each round (this VM drifts by tens of percent over minutes, so a fixed order
# favours whoever runs first): results.md then has one row per setting and round, and a
# summary of the medians over the rounds with QPS as a ratio to glibc's in the same round.
# Every server starts with a cold buffer pool (no page-list dump at shutdown, no load at
# start), so no setting inherits the pages its predecessor read; the idle RSS is also
# given without the buffer pool's data pages, which leaves roughly what malloc and the
# rest of the server keep resident. The server has its own temporary datadir and a unix
# socket, no TCP, and is stopped and removed at the end even on failure.
# Usage: bench/sysbench/run.sh
#   (env: RUN_S=60 IDLE_S=60 POINT_S=30 THREADS=4 ROUNDS=1 SETTINGS="..." OUT=build/sysbench)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
RUN_S=${RUN_S:-60}
IDLE_S=${IDLE_S:-60}
POINT_S=${POINT_S:-30}
THREADS=${THREADS:-4}
ROUNDS=${ROUNDS:-1}
TABLES=${TABLES:-4}
TABLE_SIZE=${TABLE_SIZE:-100000}
OUT=${OUT:-$ROOT/build/sysbench}

scripts/setup-deps.sh sysbench mariadb-server gnuplot-nox libjemalloc2 linux-perf
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target achunk_malloc achunk-dump >/dev/null
ACHUNK_SO=$ROOT/build/libachunk_malloc.so
DUMP=$ROOT/build/tools/dump/achunk-dump
CLK_TCK=$(getconf CLK_TCK)
# awk reads all of ldconfig's output: an early exit would kill it with SIGPIPE, which
# pipefail turns into the script's exit status.
JEMALLOC_SO=$(ldconfig -p | awk '/libjemalloc.so.2 / && !found {print $NF; found = 1}')
mkdir -p "$OUT"

# shellcheck source=bench/sysbench/server.sh
source bench/sysbench/server.sh
SERVER_OPTS=(--innodb-buffer-pool-size=256M --max-connections=64)

# The server's minor page faults so far (field 10 of /proc/PID/stat, counted after the
# parenthesised command name). Faults per transaction show what giving pages back costs
# when they are touched again, which QPS on this VM is too noisy to show.
minflt() {
  local f
  f=$(sed 's/.*) //' "/proc/$PID/stat" 2>/dev/null | awk '{print $8}')
  echo "${f:-0}"
}
# Idle RSS minus the bytes of data pages in InnoDB's buffer pool (SHOW GLOBAL STATUS):
# roughly what malloc and the rest of the server keep resident, whatever the pages the
# run happened to read. (Summing smaps outside the big mappings does not work: adjacent
# anonymous mappings merge, so malloc's arenas sometimes join the buffer pool's.)
rss_minus_pool_kb() {
  local bytes
  bytes=$(mariadb --no-defaults --socket="$SOCK" -uroot -N -e \
    "SHOW GLOBAL STATUS LIKE 'Innodb_buffer_pool_bytes_data'" 2>/dev/null | awk '{print $2}')
  echo $(($(rss_kb) - ${bytes:-0} / 1024))
}

# The achunk-bg thread's CPU time so far in clock ticks (utime+stime, fields 14 and 15 of
# its /proc/PID/task/TID/stat), or "-" when the server has no such thread.
bg_ticks() {
  local comm
  for comm in /proc/"$PID"/task/*/comm; do
    if [[ $(cat "$comm" 2>/dev/null) == achunk-bg ]]; then
      sed 's/.*) //' "${comm%comm}stat" | awk '{print $12 + $13}'
      return
    fi
  done
  echo -
}
# Milliseconds since the epoch.
now_ms() { echo $(($(date +%s%N) / 1000000)); }

SB_COMMON=(--db-driver=mysql --mysql-socket="$SOCK" --mysql-user=root --mysql-db=sbtest
  --tables="$TABLES" --table-size="$TABLE_SIZE")

# Prepare the tables once, under glibc.
start_server "" "" "${SERVER_OPTS[@]}"
mariadb --no-defaults --socket="$SOCK" -uroot -e "CREATE DATABASE IF NOT EXISTS sbtest"
sysbench oltp_read_write "${SB_COMMON[@]}" --threads="$THREADS" prepare >"$WORK/prepare.log"
stop_server

# SETTINGS="glibc achunk_default" runs a subset.
read -r -a SETTINGS <<<"${SETTINGS:-glibc jemalloc achunk_cache0_noevict achunk_cache2M achunk_default achunk_no_thread}"
: >"$OUT/rows.dat"  # round setting qps p95 errors peak_mib idle_end_mib ps_qps expired idle_rss_minus_pool_mib faults_per_tx madvise_per_tx dump_ms watch_ms bg_cpu_ms
: >"$OUT/rss.dat"
for round in $(seq 1 "$ROUNDS"); do
  # Rotate: round r starts with setting r-1 (mod the count).
  shift_by=$(((round - 1) % ${#SETTINGS[@]}))
  order=("${SETTINGS[@]:shift_by}" "${SETTINGS[@]:0:shift_by}")
  for setting in "${order[@]}"; do
    case $setting in
      glibc) preload=""; conf="" ;;
      jemalloc) preload=$JEMALLOC_SO; conf="" ;;
      achunk_cache0_noevict) preload=$ACHUNK_SO; conf="memory_chunk_cache_size:0,chunk_cache_ttl_ms:-1,span_idle_ms:-1" ;;
      achunk_cache2M) preload=$ACHUNK_SO; conf="memory_chunk_cache_size:2M" ;;
      achunk_default) preload=$ACHUNK_SO; conf="" ;;
      achunk_no_thread) preload=$ACHUNK_SO; conf="release_interval_ms:0" ;;
      achunk_before) preload=${ACHUNK_BEFORE_SO:?achunk_before needs ACHUNK_BEFORE_SO}; conf="" ;;
    esac
    echo "=== round $round: $setting ===" >&2
    start_server "$preload" "$conf" "${SERVER_OPTS[@]}"
    peak=0
    faults0=$(minflt)
    # The server's madvise calls over the read_write run: what washing costs, which QPS on
    # a noisy VM cannot show. "-" when perf cannot attach (no tracepoints, no permission).
    perf stat -x, -e syscalls:sys_enter_madvise -p "$PID" -o "$WORK/madvise.csv" \
      >/dev/null 2>&1 &
    perf_pid=$!
    sysbench oltp_read_write "${SB_COMMON[@]}" --threads="$THREADS" --time="$RUN_S" \
      --percentile=95 run >"$WORK/rw.log" &
    sb=$!
    t=0
    while kill -0 "$sb" 2>/dev/null; do
      r=$(rss_kb); ((r > peak)) && peak=$r
      ((round == 1)) && echo "$setting $t $r" >>"$OUT/rss.dat"; sleep 1; t=$((t + 1))
    done
    wait "$sb"
    faults=$(($(minflt) - faults0))
    kill -INT "$perf_pid" 2>/dev/null || true
    wait "$perf_pid" 2>/dev/null || true
    madvise=$(awk -F, '/sys_enter_madvise/ && $1 ~ /^[0-9]+$/ {print $1}' "$WORK/madvise.csv" 2>/dev/null || true)
    rm -f "$WORK/madvise.csv"
    bg0=$(bg_ticks)
    for _ in $(seq 1 "$IDLE_S"); do
      r=$(rss_kb); ((round == 1)) && echo "$setting $t $r" >>"$OUT/rss.dat"; sleep 1; t=$((t + 1))
    done
    idle_end=$(rss_kb)
    idle_small=$(rss_minus_pool_kb)
    # The dump through the stats region, taken live; what reading it and one sample cost.
    dump_file=$OUT/dump_${setting}_round$round.txt
    expired=- dump_ms=- watch_ms=- bg_ms=-
    if [[ $preload == "$ACHUNK_SO" ]]; then
      bg1=$(bg_ticks)
      [[ $bg0 != - && $bg1 != - ]] &&
        bg_ms=$(awk -v d=$((bg1 - bg0)) -v hz="$CLK_TCK" 'BEGIN{printf "%.0f", d * 1000 / hz}')
      t0=$(now_ms)
      "$DUMP" "$PID" >"$dump_file" || echo "achunk-dump $PID failed" >&2
      dump_ms=$(($(now_ms) - t0))
      t0=$(now_ms)
      "$DUMP" --watch "$PID" 1 1 >/dev/null || echo "achunk-dump --watch $PID failed" >&2
      watch_ms=$(($(now_ms) - t0))
      expired=$( (grep -ho 'expired_unmaps= *[0-9,]*' "$dump_file" || true) | head -n 1 |
        tr -d ' ,' | cut -d= -f2)
    else
      : >"$dump_file"
    fi
    sysbench oltp_point_select "${SB_COMMON[@]}" --threads="$THREADS" --time="$POINT_S" run \
      >"$WORK/ps.log"
    stop_server
    qps=$(awk '/queries:/{gsub(/[()]/,"",$3); print $3}' "$WORK/rw.log")
    p95=$(awk '/95th percentile:/{print $3}' "$WORK/rw.log")
    errs=$(awk '/ignored errors:/{print $3}' "$WORK/rw.log")
    tx=$(awk '/transactions:/{print $2}' "$WORK/rw.log")
    ps_qps=$(awk '/queries:/{gsub(/[()]/,"",$3); print $3}' "$WORK/ps.log")
    : >"$WORK/error.log"
    echo "$round $setting $qps $p95 $errs $(awk -v k="$peak" 'BEGIN{printf "%.1f", k/1024}')" \
      "$(awk -v k="$idle_end" 'BEGIN{printf "%.1f", k/1024}') $ps_qps ${expired:--}" \
      "$(awk -v k="$idle_small" 'BEGIN{printf "%.1f", k/1024}')" \
      "$(awk -v f="$faults" -v t="${tx:-0}" 'BEGIN{printf "%.2f", (t > 0 ? f / t : 0)}')" \
      "$(awk -v m="${madvise:--}" -v t="${tx:-0}" 'BEGIN{if (m == "-" || t <= 0) print "-"; else printf "%.3f", m / t}')" \
      "$dump_ms $watch_ms $bg_ms" >>"$OUT/rows.dat"
  done
done

# Per round, then the medians over rounds (QPS also as a ratio to glibc in the same round).
awk -v settings="${SETTINGS[*]}" '
  function median(list,   a, n, i, j, t) {
    n = split(list, a, " ")
    for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] + 0 < a[i] + 0) { t = a[i]; a[i] = a[j]; a[j] = t }
    return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
  }
  { row[NR] = $0; r = $1; s = $2; qps[r, s] = $3
    for (f = 3; f <= 15; f++) vals[s, f] = vals[s, f] " " $f }
  END {
    print "| round | setting | read_write QPS | p95 ms | errors | peak RSS MiB | RSS end of idle MiB | point_select QPS | expired_unmaps | idle RSS minus buffer-pool data MiB | minor faults per read_write transaction | madvise calls per read_write transaction | achunk-dump PID ms | one --watch 1 1 sample ms | achunk-bg CPU ms over the idle window |"
    print "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    for (i = 1; i <= NR; i++) { $0 = row[i]; printf "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", $1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15 }
    print ""
    print "Medians over the rounds:"
    print ""
    print "| setting | read_write QPS | QPS / glibc (same round) | p95 ms | errors | peak RSS MiB | RSS end of idle MiB | point_select QPS | expired_unmaps | idle RSS minus buffer-pool data MiB | minor faults per read_write transaction | madvise calls per read_write transaction | achunk-dump PID ms | one --watch 1 1 sample ms | achunk-bg CPU ms over the idle window |"
    print "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    n = split(settings, names, " ")
    for (k = 1; k <= n; k++) {
      s = names[k]; ratios = ""
      for (key in qps) { split(key, p, SUBSEP); if (p[2] == s && qps[p[1], "glibc"] > 0) ratios = ratios " " qps[key] / qps[p[1], "glibc"] }
      expired = vals[s, 9] ~ /-/ ? "-" : median(vals[s, 9])  # not achunk: no dump
      madv = vals[s, 12] ~ /-/ ? "-" : sprintf("%.3f", median(vals[s, 12]))  # perf could not attach
      for (f = 13; f <= 15; f++) tool[f] = vals[s, f] ~ /-/ ? "-" : median(vals[s, f])  # not achunk, or no thread
      printf "| %s | %.1f | %.3f | %.2f | %s | %.1f | %.1f | %.1f | %s | %.1f | %.2f | %s | %s | %s | %s |\n", s, median(vals[s, 3]),
        median(ratios), median(vals[s, 4]), median(vals[s, 5]), median(vals[s, 6]), median(vals[s, 7]),
        median(vals[s, 8]), expired, median(vals[s, 10]), median(vals[s, 11]), madv, tool[13], tool[14], tool[15]
    }
  }' "$OUT/rows.dat" >"$OUT/results.md"

gnuplot <<PLOT
set terminal png size 1000,600 noenhanced
set output "$OUT/rss.png"
set title "mariadbd RSS: oltp_read_write ${RUN_S}s, then ${IDLE_S}s idle"
set xlabel "seconds"
set ylabel "RSS MiB"
set key left top
plot for [s in "${SETTINGS[*]}"] "< awk '\$1==\"".s."\"' $OUT/rss.dat" using 2:(\$3/1024) with lines title s
PLOT
cat "$OUT/results.md"
echo "plot: $OUT/rss.png; dumps: $OUT/dump_*.txt" >&2
