#!/usr/bin/env bash
# ctest install.deb: the Debian packages, installed the way a DBA installs them. Builds
# them (scripts/package.sh into a scratch dir), installs them with dpkg -i, runs a program
# preloaded from the installed path, finds both manual pages and the installed
# achunk-dump, starts a private MariaDB (bench/sysbench/server.sh, not the system's
# service) with the LD_PRELOAD and ACHUNK_CONF of the installed mariadb.conf and reads it
# with achunk-dump, then purges the packages and checks that nothing they installed is
# left. Stops the server and purges the packages on any failure.
# Exits 77 (ctest: skipped) when not root, or when achunk's packages or files are already
# on the machine (the test would overwrite and then remove them).
# Usage: tests/install/deb.sh <source dir>
set -euo pipefail
SKIP=77
src=$(cd "$1" && pwd)
PKGS=(libachunk-malloc0 libachunk-dev achunk-tools)

step="start"
# Any command that fails names the step it failed in.
trap 'echo "install.deb: FAILED in step \"$step\": line $LINENO: $BASH_COMMAND" >&2' ERR
fail() {
  echo "install.deb: FAILED in step \"$step\": $*" >&2
  exit 1
}
skip() {
  echo "install.deb: skipped: $*"
  exit "$SKIP"
}

[[ $(id -u) -eq 0 ]] || skip "needs root (dpkg -i into /usr)"
for tool in dpkg-shlibdeps dpkg-architecture man mariadbd mariadb-install-db mariadb-admin; do
  command -v "$tool" >/dev/null || fail "$tool is missing (scripts/setup-deps.sh installs it)"
done
for p in "${PKGS[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  [[ -z "$status" || "$status" == not-installed ]] || skip "$p is on this machine ($status)"
done

tmp=$(mktemp -d /tmp/achunk-deb.XXXXXX)
installed=0
on_exit() {
  local rc=$?
  set +e
  trap - ERR
  # bench/sysbench/server.sh's: stops the server and removes its datadir.
  declare -F cleanup >/dev/null && cleanup
  if ((installed)); then
    dpkg -P "${PKGS[@]}" >/dev/null 2>&1 || echo "install.deb: dpkg -P ${PKGS[*]} failed" >&2
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

step="build the packages (scripts/package.sh)"
t0=$SECONDS
"$src/scripts/package.sh" "$tmp/build" >"$tmp/debs.txt" 2>"$tmp/package.log" ||
  { tail -n 30 "$tmp/package.log" >&2; fail "scripts/package.sh failed (its log's tail is above)"; }
mapfile -t debs <"$tmp/debs.txt"
[[ ${#debs[@]} -eq 3 ]] || fail "expected 3 packages, got: ${debs[*]}"
echo "install.deb: built ${#debs[@]} packages in $((SECONDS - t0)) s"

step="package metadata"
multiarch=$(dpkg-architecture -qDEB_HOST_MULTIARCH)
libdir=/usr/lib/$multiarch
for deb in "${debs[@]}"; do
  name=$(dpkg-deb -f "$deb" Package)
  printf '  %-20s %s %s %s %6d bytes  Depends: %s\n' "$name" "$(dpkg-deb -f "$deb" Version)" \
    "$(dpkg-deb -f "$deb" Architecture)" "$(dpkg-deb -f "$deb" Section)" \
    "$(stat -c %s "$deb")" "$(dpkg-deb -f "$deb" Depends)"
  dpkg-deb -c "$deb" >"$tmp/$name.contents"
  grep -q " \./usr/share/doc/$name/copyright\$" "$tmp/$name.contents" ||
    fail "$name has no /usr/share/doc/$name/copyright"
  # Files already there (a cmake --install into /usr) would be taken over, then removed.
  while read -r path; do
    if [[ -e "$path" || -L "$path" ]]; then
      skip "$path is already on this machine (not from a package)"
    fi
  done < <(awk '$1 !~ /^d/ {print substr($6, 2)}' "$tmp/$name.contents")
done

step="dpkg -i"
installed=1
dpkg -i "${debs[@]}" >"$tmp/dpkg-i.log" 2>&1 || { cat "$tmp/dpkg-i.log" >&2; fail "dpkg -i failed"; }
for p in "${PKGS[@]}"; do
  dpkg -L "$p" >"$tmp/$p.list"
  echo "  dpkg -L $p: $(wc -l <"$tmp/$p.list") paths"
done
for want in "libachunk-malloc0:$libdir/libachunk_malloc.so" \
  "libachunk-malloc0:/usr/share/man/man3/achunk.3.gz" "libachunk-dev:$libdir/libachunk.a" \
  "libachunk-dev:/usr/include/achunk/achunk.h" "libachunk-dev:$libdir/pkgconfig/achunk.pc" \
  "libachunk-dev:$libdir/cmake/achunk/achunkConfig.cmake" "achunk-tools:/usr/bin/achunk-dump" \
  "achunk-tools:/usr/share/man/man1/achunk-dump.1.gz" \
  "achunk-tools:/usr/share/achunk/mariadb.conf" "achunk-tools:/usr/share/achunk/README" \
  "achunk-tools:/usr/share/achunk/postgresql.environment"; do
  grep -qx "${want#*:}" "$tmp/${want%%:*}.list" || fail "${want%%:*} does not install ${want#*:}"
  [[ -e "${want#*:}" ]] || fail "${want#*:} is listed but missing (a dpkg path-exclude?)"
done

step="a program preloaded from $libdir"
# awk, not ls: coreutils close stderr at exit (gnulib's close_stdout), before the
# library's exit print could reach it.
out=$(LD_PRELOAD=$libdir/libachunk_malloc.so ACHUNK_CONF=stats_print:1 \
  awk 'BEGIN { for (i = 0; i < 200000; i++) a[i] = i "x"; print length(a) }' 2>"$tmp/awk.err") ||
  fail "awk exited $?: $(head -c 600 "$tmp/awk.err")"
[[ "$out" == 200000 ]] || fail "awk printed '$out', not 200000"
grep -q '^\[chunk_mgr\]' "$tmp/awk.err" ||
  fail "no [chunk_mgr] line on stderr at exit: $(head -c 600 "$tmp/awk.err")"

step="man pages and achunk-dump --help"
[[ $(man -w achunk) == /usr/share/man/man3/achunk.3.gz ]] || fail "man -w achunk: $(man -w achunk 2>&1)"
[[ $(man -w achunk-dump) == /usr/share/man/man1/achunk-dump.1.gz ]] ||
  fail "man -w achunk-dump: $(man -w achunk-dump 2>&1)"
for page in 3/achunk.3 1/achunk-dump.1; do
  gzip -t "/usr/share/man/man$page.gz" || fail "man$page.gz is not gzip"
done
/usr/bin/achunk-dump --help >"$tmp/help.txt" || fail "achunk-dump --help exited $?"
grep -q "Exit status" "$tmp/help.txt" || fail "achunk-dump --help lacks its exit status"

step="read the installed mariadb.conf"
conf_file=/usr/share/achunk/mariadb.conf
preload=$(sed -n 's/^Environment="LD_PRELOAD=\(.*\)"$/\1/p' "$conf_file")
achunk_conf=$(sed -n 's/^Environment="ACHUNK_CONF=\(.*\)"$/\1/p' "$conf_file")
[[ "$preload" == "$libdir/libachunk_malloc.so" ]] || fail "LD_PRELOAD is '$preload'"
[[ -n "$achunk_conf" ]] || fail "no ACHUNK_CONF in $conf_file"
grep -q '^\[Service\]$' "$conf_file" || fail "no [Service] section in $conf_file"

step="a private MariaDB under the drop-in"
# shellcheck source-path=SCRIPTDIR source=../../bench/sysbench/server.sh
source "$src/bench/sysbench/server.sh"
# server.sh set its own traps; on_exit calls its cleanup.
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
start_server "$preload" "$achunk_conf" || fail "mariadbd did not start"
grep -q libachunk_malloc "/proc/$PID/maps" || fail "mariadbd ($PID) has not mapped the library"

step="achunk-dump --list lists mariadbd"
listed=0
for _ in $(seq 1 50); do
  /usr/bin/achunk-dump --list >"$tmp/list.txt" 2>"$tmp/list.err" || true
  if awk -v pid="$PID" '$1 == pid && $2 == "mariadbd" {found = 1} END {exit !found}' \
    "$tmp/list.txt"; then
    listed=1
    break
  fi
  sleep 0.2
done
((listed)) || fail "pid $PID not listed after 10 s: $(cat "$tmp/list.txt" "$tmp/list.err")"

step="achunk-dump PID"
/usr/bin/achunk-dump "$PID" >"$tmp/dump.txt" 2>&1 || fail "exit $?: $(head -c 600 "$tmp/dump.txt")"
grep -q '^\[chunk_mgr\]' "$tmp/dump.txt" || fail "no [chunk_mgr] line: $(head -c 600 "$tmp/dump.txt")"
# The drop-in's ACHUNK_CONF took: its cache size is the process's option.
want_cache=$(sed -n 's/.*memory_chunk_cache_size:\([0-9]*\)G.*/\1/p' <<<"$achunk_conf")
if [[ -n "$want_cache" ]]; then
  grep -Eq "memory_chunk_cache_size[=: ]+$((want_cache << 30))\b" "$tmp/dump.txt" ||
    fail "memory_chunk_cache_size is not ${want_cache}G: $(grep memory_chunk "$tmp/dump.txt")"
fi
stop_server

step="dpkg -P"
# Before: which listed directories no other package owns (those must go too).
: >"$tmp/own-files"
: >"$tmp/own-dirs"
for p in "${PKGS[@]}"; do
  while read -r path; do
    if [[ -d "$path" && ! -L "$path" ]]; then
      owners=$(dpkg-query -S "$path" 2>/dev/null | sed 's/: .*//' | tr -d ' ' | tr ',' '\n')
      others=$(grep -vxF -e "${PKGS[0]}" -e "${PKGS[1]}" -e "${PKGS[2]}" <<<"$owners" || true)
      [[ -n "$others" ]] || echo "$path" >>"$tmp/own-dirs"
    else
      echo "$path" >>"$tmp/own-files"
    fi
  done <"$tmp/$p.list"
done
dpkg -P "${PKGS[@]}" >"$tmp/dpkg-P.log" 2>&1 || { cat "$tmp/dpkg-P.log" >&2; fail "dpkg -P failed"; }
installed=0

step="nothing left after dpkg -P"
left=()
while read -r path; do
  if [[ -e "$path" || -L "$path" ]]; then left+=("$path"); fi
done < <(cat "$tmp/own-files" "$tmp/own-dirs")
[[ ${#left[@]} -eq 0 ]] || fail "left behind: ${left[*]}"
echo "install.deb: $(wc -l <"$tmp/own-files") files and $(wc -l <"$tmp/own-dirs") directories" \
  "installed and removed; $((SECONDS - t0)) s in all"
echo "install.deb ok"
