#!/usr/bin/env bash
# PostgreSQL under each allocator: a new connection per transaction (pgbench -C -S, one
# postmaster fork per transaction) and the anonymous memory of all its processes under a
# steady load. A private cluster in a temporary directory on a unix socket, run as user
# postgres, restarted for each allocator (LD_PRELOAD inherited by every backend), the
# order rotated each round. Prints the median TPS, its ratio to glibc's (median of the
# same-round ratios) and the median of the summed RssAnon.
# Usage: bench/fork/pgbench.sh [build-dir]   (as root)
#   ROUNDS=3 RUN_S=20 CLIENTS=32 SCALE=10 EXTRA="name=/path/lib.so"
# Packages: scripts/setup-deps.sh postgresql (and the peers' packages).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
rounds=${ROUNDS:-3}
run_s=${RUN_S:-20}
clients=${CLIENTS:-32}
scale=${SCALE:-10}
pgbin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
[[ -x $pgbin/postgres ]] || { echo "pgbench.sh: no PostgreSQL server (setup-deps.sh postgresql)" >&2; exit 1; }
[[ $(id -u) -eq 0 ]] || { echo "pgbench.sh: run as root (it runs the cluster as postgres)" >&2; exit 1; }
# shellcheck source=../workloads/allocators.sh
source "$root/bench/workloads/allocators.sh"
n=${#names[@]}

work=$(mktemp -d /tmp/achunk-pgbench.XXXXXX)
chown postgres: "$work"
chmod 755 "$work"
as_pg() { runuser -u postgres -- "$@"; }
pid=
stop() {
  if [[ -n $pid ]]; then
    # The postmaster (runuser's child): SIGINT is a fast shutdown.
    [[ -f $work/data/postmaster.pid ]] && kill -INT "$(head -n 1 "$work/data/postmaster.pid")" 2>/dev/null
    kill -INT "$pid" 2>/dev/null || true
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$pid" 2>/dev/null || true
    pid=
  fi
}
trap 'stop; rm -rf "$work"' EXIT
as_pg "$pgbin/initdb" -D "$work/data" -A trust >"$work/initdb.log" 2>&1

start() {  # $1: LD_PRELOAD value or ""
  as_pg env ${1:+LD_PRELOAD=$1} ACHUNK_CONF= "$pgbin/postgres" -D "$work/data" -k "$work" \
    -c listen_addresses= -c max_connections=100 -c shared_buffers=128MB -c fsync=off \
    >>"$work/server.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do
    as_pg "$pgbin/pg_isready" -q -h "$work" && return 0
    sleep 0.1
  done
  echo "pgbench.sh: the server did not start (see $work/server.log)" >&2
  tail -n 20 "$work/server.log" >&2
  exit 1
}
pgb() { as_pg pgbench -h "$work" -n "$@" postgres 2>&1; }

start ""
pgb -i -q -s "$scale" >/dev/null
stop

raw=$work/raw.tsv
for ((r = 0; r < rounds; r++)); do
  for ((k = 0; k < n; k++)); do
    i=$(((k + r) % n))
    start "${preload[i]}"
    pgb -S -T 3 -c 4 >/dev/null  # warm the cache
    tps=$(pgb -C -S -T "$run_s" -c "$clients" -j 2 | awk '/^tps/ { print $3; exit }')
    # Anonymous memory of the postmaster and its children mid-way through a steady load.
    pgb -S -T 10 -c 14 -j 2 >/dev/null &
    load=$!
    sleep 6
    pm=$(head -n 1 "$work/data/postmaster.pid")
    anon=$(for p in "$pm" $(pgrep -P "$pm" || true); do
      awk '/RssAnon/ { print $2 }' "/proc/$p/status" 2>/dev/null || true
    done | awk '{ s += $1 } END { printf "%.1f", s / 1024 }')
    wait "$load"
    stop
    printf '%s\t%s\t%s\t%s\n' "${names[i]}" "$r" "$tps" "$anon" >>"$raw"
    echo "round $r: ${names[i]} -C tps $tps, anon $anon MiB" >&2
  done
done

echo
echo "pgbench -C -S -c $clients ($run_s s), median of $rounds rounds; anon: summed RssAnon (MiB) under -c 14"
printf '%-10s %10s %8s %10s\n' allocator tps "/glibc" anon_MiB
for name in "${names[@]}"; do
  awk -F'\t' -v a="$name" '
    $1 == "glibc" { g[$2] = $3 }
    $1 == a { t[$2] = $3; m[$2] = $4 }
    function median(arr,   i, j, k, x, tmp) {
      k = 0; for (i in arr) x[++k] = arr[i]
      for (i = 1; i <= k; i++) for (j = i + 1; j <= k; j++) if (x[j] < x[i]) { tmp = x[i]; x[i] = x[j]; x[j] = tmp }
      return k % 2 ? x[(k + 1) / 2] : (x[k / 2] + x[k / 2 + 1]) / 2
    }
    END { for (r in t) q[r] = t[r] / g[r]; printf "%-10s %10.1f %7.2fx %10.1f\n", a, median(t), median(q), median(m) }
  ' "$raw"
done
