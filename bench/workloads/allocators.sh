# Sourced by run.sh and instructions.sh: the allocators a workload runs under, as two
# arrays, `names` and `preload` (the LD_PRELOAD value; empty for glibc): glibc, the
# Debian packages of jemalloc, tcmalloc and mimalloc (found through the loader's cache),
# achunk from "$build", then each "name=/path/to/lib.so" of $EXTRA.
# Needs `build` set. Packages: scripts/setup-deps.sh.

lib() {
  local path
  # No early exit in awk: ldconfig would die of SIGPIPE, and pipefail would stop the script.
  path=$(/sbin/ldconfig -p | awk -v n="$1" '$1 == n && !found { print $NF; found = 1 }')
  [[ -n $path ]] || { echo "$(basename "$0"): $1 not installed (scripts/setup-deps.sh)" >&2; exit 1; }
  echo "$path"
}
names=(glibc jemalloc tcmalloc mimalloc achunk)
preload=("" "$(lib libjemalloc.so.2)" "$(lib libtcmalloc_minimal.so.4)" "$(lib libmimalloc.so.2)"
  "$build/libachunk_malloc.so")
for extra in ${EXTRA:-}; do
  names+=("${extra%%=*}")
  preload+=("${extra#*=}")
done
