#!/usr/bin/env bash
# Idle RSS after big rows, against a private MariaDB server under each allocator setting:
# CONNS connections each read one ROW_MB MiB row (a LONGBLOB) and then sit idle in a
# SLEEP, as a pool of application connections does after a report. Reading the row grows
# the connection's packet buffer to the row's size and the server shrinks it back to
# net_buffer_length (16 KiB) when the command ends; InnoDB's blob buffers come and go.
# Prints the server's RSS before the reads, AT_S seconds after they start (the rows
# sent, the connections idle) and IDLE_S seconds after, one row per setting and round,
# the order of the settings rotated each round.
# Usage: bench/sysbench/big_rows.sh
#   (env: CONNS=40 ROW_MB=8 AT_S=8 IDLE_S=45 ROUNDS=1 SETTINGS="glibc jemalloc achunk"
#    ACHUNK_BEFORE_SO=<another build's libachunk_malloc.so> for the setting achunk_before)
set -euo pipefail
cd "$(dirname "$0")/../.."
ROOT=$PWD
CONNS=${CONNS:-40}
ROW_MB=${ROW_MB:-8}
AT_S=${AT_S:-8}
IDLE_S=${IDLE_S:-45}
ROUNDS=${ROUNDS:-1}

scripts/setup-deps.sh mariadb-server libjemalloc2
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build --target achunk_malloc >/dev/null
ACHUNK_SO=$ROOT/build/libachunk_malloc.so
# awk reads all of ldconfig's output: an early exit would kill it with SIGPIPE.
JEMALLOC_SO=$(ldconfig -p | awk '/libjemalloc.so.2 / && !found {print $NF; found = 1}')

# shellcheck source=bench/sysbench/server.sh
source bench/sysbench/server.sh
SERVER_OPTS=(--innodb-buffer-pool-size=128M --max-connections=$((CONNS + 8))
  --max-allowed-packet=$((4 * ROW_MB))M)
client() { mariadb --no-defaults --socket="$SOCK" -uroot --max-allowed-packet=$((4 * ROW_MB))M "$@"; }

start_server "" "" "${SERVER_OPTS[@]}"
client -e "CREATE DATABASE d; CREATE TABLE d.t (id INT PRIMARY KEY, b LONGBLOB);
  INSERT INTO d.t VALUES (1, REPEAT('x', $ROW_MB * 1024 * 1024))"
stop_server

read -r -a SETTINGS <<<"${SETTINGS:-glibc jemalloc achunk}"
echo "| round | setting | RSS before MiB | RSS at ${AT_S} s MiB | RSS at ${IDLE_S} s MiB |"
echo "|---|---|---|---|---|"
for round in $(seq 1 "$ROUNDS"); do
  shift_by=$(((round - 1) % ${#SETTINGS[@]}))
  order=("${SETTINGS[@]:shift_by}" "${SETTINGS[@]:0:shift_by}")
  for setting in "${order[@]}"; do
    case $setting in
      glibc) preload="" ;;
      jemalloc) preload=$JEMALLOC_SO ;;
      achunk) preload=$ACHUNK_SO ;;
      achunk_before) preload=${ACHUNK_BEFORE_SO:?achunk_before needs ACHUNK_BEFORE_SO} ;;
      *) echo "big_rows.sh: unknown setting '$setting'" >&2; exit 2 ;;
    esac
    start_server "$preload" "" "${SERVER_OPTS[@]}"
    sleep 2
    before=$(rss_kb)
    clients=()
    for _ in $(seq 1 "$CONNS"); do
      # Silent: the server's stop ends each SLEEP with a lost connection.
      client -e "SELECT b FROM d.t; SELECT SLEEP($((IDLE_S + 10)))" >/dev/null 2>&1 &
      clients+=($!)
    done
    sleep "$AT_S"
    at=$(rss_kb)
    sleep $((IDLE_S - AT_S))
    idle=$(rss_kb)
    echo "| $round | $setting | $((before / 1024)) | $((at / 1024)) | $((idle / 1024)) |"
    stop_server
    wait "${clients[@]}" 2>/dev/null || true
  done
done
