# shellcheck shell=bash
# Sourced by run.sh and big_rows.sh: a private MariaDB server in a temporary datadir on a
# unix socket, no TCP, stopped and removed on exit even on failure. Defines WORK, SOCK,
# PID, start_server PRELOAD CONF [mariadbd options...], stop_server and rss_kb.
# Packages: scripts/setup-deps.sh mariadb-server.

WORK=$(mktemp -d /tmp/achunk-sysbench.XXXXXX)
SOCK=$WORK/mysqld.sock
PID=
stop_server() {
  if [[ -n "$PID" ]] && kill -0 "$PID" 2>/dev/null; then
    timeout 60 mariadb-admin --no-defaults --socket="$SOCK" -uroot shutdown 2>/dev/null ||
      kill "$PID" || true
    for _ in $(seq 1 60); do kill -0 "$PID" 2>/dev/null || break; sleep 0.5; done
    kill -9 "$PID" 2>/dev/null || true
  fi
  PID=
}
cleanup() { stop_server; rm -rf "$WORK"; }
trap cleanup EXIT INT TERM

mariadb-install-db --no-defaults --datadir="$WORK/data" --user="$(id -un)" \
  --auth-root-authentication-method=normal --skip-test-db >"$WORK/install.log" 2>&1

# Every server starts with a cold buffer pool: no page-list dump at shutdown, no load at
# start, so no setting inherits the pages its predecessor read.
start_server() {  # $1 = preload library or "", $2 = ACHUNK_CONF, then mariadbd options
  local preload=$1 conf=$2
  shift 2
  env ${preload:+LD_PRELOAD=$preload} ACHUNK_CONF="$conf" \
    /usr/sbin/mariadbd --no-defaults --datadir="$WORK/data" --socket="$SOCK" --skip-networking \
    --pid-file="$WORK/mysqld.pid" --user="$(id -un)" --innodb-buffer-pool-load-at-startup=OFF \
    --innodb-buffer-pool-dump-at-shutdown=OFF --log-error="$WORK/error.log" "$@" \
    2>"$WORK/stderr.log" &
  PID=$!
  for _ in $(seq 1 120); do
    mariadb-admin --no-defaults --socket="$SOCK" -uroot ping >/dev/null 2>&1 && return 0
    sleep 0.5
  done
  echo "mariadbd did not start; see $WORK/error.log" >&2
  cat "$WORK/error.log" >&2 || true
  return 1
}

rss_kb() { awk '/VmRSS/{print $2}' "/proc/$PID/status" 2>/dev/null || echo 0; }
