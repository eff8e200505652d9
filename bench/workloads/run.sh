#!/usr/bin/env bash
# The workload matrix: every pattern of achunk_workloads under glibc, jemalloc, tcmalloc and
# mimalloc (Debian packages, through LD_PRELOAD) and achunk (libachunk_malloc.so), the order
# of allocators rotated each round. Prints, per pattern, the median elapsed time and peak
# RSS of each allocator as ratios to the best of the four peers, and draws the time ratios
# as one PNG bar chart (gnuplot).
# Usage: bench/workloads/run.sh [build-dir]
#   ROUNDS=3 SCALE=0.25 PATTERNS="pairs replace1 ..." OUT=out/workloads
#   EXTRA="name=/path/to/lib.so ..."  more allocators to compare (e.g. another achunk build);
#   each also gets a table of its time and peak RSS over achunk's, the median of the
#   ratios within each round
#   PIN_CPU=1  the patterns that run one thread at a time run on that CPU alone (taskset),
#   so a VM whose vCPUs run at different speeds does not pick their ratios; the others
#   keep every CPU
# Packages: scripts/setup-deps.sh (libjemalloc2 libtcmalloc-minimal4 libmimalloc2.0 time
# gnuplot-nox).
set -euo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$root/build}" && pwd)
bin=$build/bench/achunk_workloads
rounds=${ROUNDS:-3}
scale=${SCALE:-0.25}
patterns=${PATTERNS:-"pairs newdel classes replace1 replace2 strings usable prodcons server inherit ring churn spawn conns midsize midpairs midcalloc big huge realloc bigrealloc pktbuf shrink calloc aligned bigalign hugealign appends"}
out=${OUT:-$root/out/workloads}
mkdir -p "$out"

[[ -x $bin ]] || { echo "run.sh: $bin not built (ninja -C $build achunk_workloads)" >&2; exit 1; }
[[ -x /usr/bin/time ]] || { echo "run.sh: /usr/bin/time missing (scripts/setup-deps.sh)" >&2; exit 1; }

# The patterns whose work runs on one thread (replace1's worker, with main waiting).
single=" pairs newdel classes replace1 strings usable big huge realloc bigrealloc pktbuf shrink calloc aligned bigalign hugealign "
pin_cpu=${PIN_CPU:-}
if [[ -n $pin_cpu ]]; then
  command -v taskset >/dev/null || { echo "run.sh: PIN_CPU needs taskset (util-linux)" >&2; exit 1; }
  taskset -c "$pin_cpu" true 2>/dev/null || { echo "run.sh: PIN_CPU=$pin_cpu: no such CPU here" >&2; exit 1; }
fi

# shellcheck source=allocators.sh
source "$root/bench/workloads/allocators.sh"
n=${#names[@]}

raw=$out/raw.tsv
: >"$raw"
for ((r = 0; r < rounds; r++)); do
  for pattern in $patterns; do
    for ((k = 0; k < n; k++)); do
      i=$(((k + r) % n))
      rss_file=$out/.rss
      pin=()
      [[ -n $pin_cpu && $single == *" $pattern "* ]] && pin=(taskset -c "$pin_cpu")
      line=$("${pin[@]}" env ${preload[i]:+LD_PRELOAD=${preload[i]}} /usr/bin/time -f "%M" \
        -o "$rss_file" "$bin" "$pattern" "$scale")
      ms=$(awk '{ print $2 }' <<<"$line")
      rss=$(tail -n 1 "$rss_file")
      printf '%s\t%s\t%s\t%s\t%s\n' "$pattern" "${names[i]}" "$r" "$ms" "$rss" >>"$raw"
      echo "round $r: $pattern ${names[i]} ${ms} ms ${rss} KiB" >&2
    done
  done
done

# Medians, ratios to the best peer (glibc, jemalloc, tcmalloc, mimalloc), geometric means.
table=$out/ratios.tsv
awk -F'\t' -v order="${names[*]}" -v patterns="$patterns" '
  function median(key,   i, j, t, m) {
    m = cnt[key]
    for (i = 1; i <= m; i++) a[i] = val[key, i]
    for (i = 2; i <= m; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
    return m % 2 ? a[(m + 1) / 2] : (a[m / 2] + a[m / 2 + 1]) / 2
  }
  { k = "ms" SUBSEP $1 SUBSEP $2; val[k, ++cnt[k]] = $4
    k = "rss" SUBSEP $1 SUBSEP $2; val[k, ++cnt[k]] = $5
    byround["ms", $1, $2, $3] = $4; byround["rss", $1, $2, $3] = $5; nr = $3 + 1 }
  END {
    na = split(order, al, " "); np = split(patterns, pl, " ")
    printf "pattern"; for (x = 1; x <= na; x++) printf "\t%s", al[x]; printf "\n"
    for (y = 1; y <= np; y++) {
      p = pl[y]
      for (m = 0; m < 2; m++) {
        metric = m ? "rss" : "ms"; best = -1
        for (x = 1; x <= 4; x++) { v = median(metric SUBSEP p SUBSEP al[x]); if (best < 0 || v < best) best = v }
        if (best <= 0) best = 1
        for (x = 1; x <= na; x++) {
          v = median(metric SUBSEP p SUBSEP al[x]); med[metric, p, al[x]] = v
          ratio[metric, p, al[x]] = v / best; logsum[metric, al[x]] += log(v / best)
        }
      }
      printf "%s", p; for (x = 1; x <= na; x++) printf "\t%.2f", ratio["ms", p, al[x]]; printf "\n"
    }
    printf "geomean"; for (x = 1; x <= na; x++) printf "\t%.2f", exp(logsum["ms", al[x]] / np); printf "\n"
    print "" > "/dev/stderr"
    # The readable report: median ms and peak RSS (MiB), each with its ratio to the best peer.
    printf "| pattern | metric |" > "/dev/stderr"; for (x = 1; x <= na; x++) printf " %s |", al[x] > "/dev/stderr"
    printf "\n|---|---|" > "/dev/stderr"; for (x = 1; x <= na; x++) printf "---|" > "/dev/stderr"; printf "\n" > "/dev/stderr"
    for (y = 1; y <= np; y++) {
      p = pl[y]
      printf "| %s | time |", p > "/dev/stderr"
      for (x = 1; x <= na; x++) printf " %.0f ms (%.2fx) |", med["ms", p, al[x]], ratio["ms", p, al[x]] > "/dev/stderr"
      printf "\n| | peak RSS |" > "/dev/stderr"
      for (x = 1; x <= na; x++) printf " %.1f MiB (%.2fx) |", med["rss", p, al[x]] / 1024, ratio["rss", p, al[x]] > "/dev/stderr"
      printf "\n" > "/dev/stderr"
    }
    printf "| geomean | time |" > "/dev/stderr"
    for (x = 1; x <= na; x++) printf " %.2fx |", exp(logsum["ms", al[x]] / np) > "/dev/stderr"
    printf "\n| | peak RSS |" > "/dev/stderr"
    for (x = 1; x <= na; x++) printf " %.2fx |", exp(logsum["rss", al[x]] / np) > "/dev/stderr"
    printf "\n" > "/dev/stderr"
    # Each EXTRA build against achunk: the median over rounds of the ratio within a round,
    # which the slow and fast phases of the VM (minutes long) move far less than medians.
    for (x = 6; x <= na; x++) {
      printf "\n| pattern | %s / achunk, time | %s / achunk, peak RSS |\n|---|---|---|\n", al[x], al[x] > "/dev/stderr"
      for (y = 1; y <= np; y++) {
        p = pl[y]; printf "| %s |", p > "/dev/stderr"
        for (m = 0; m < 2; m++) {
          metric = m ? "rss" : "ms"; key = "same" SUBSEP metric SUBSEP p SUBSEP al[x]
          for (r = 0; r < nr; r++) {
            a0 = byround[metric, p, "achunk", r]; a1 = byround[metric, p, al[x], r]
            if (a0 > 0 && a1 > 0) val[key, ++cnt[key]] = a1 / a0
          }
          printf " %.2fx |", cnt[key] ? median(key) : 0 > "/dev/stderr"
        }
        printf "\n" > "/dev/stderr"
      }
    }
  }' "$raw" >"$table" 2>"$out/report.md"
cat "$out/report.md"
echo "rounds=$rounds scale=$scale${pin_cpu:+ pin_cpu=$pin_cpu}; raw: $raw; ratios: $table" >&2

if command -v gnuplot >/dev/null 2>&1; then
  gnuplot <<EOF
set terminal png size 1200,600
set output "$out/workloads.png"
set title "Median elapsed time / best of glibc, jemalloc, tcmalloc, mimalloc (lower is better)"
set style data histograms
set style histogram clustered gap 1
set style fill solid border -1
set boxwidth 0.9
set logscale y 2
set yrange [0.25:*]
set grid ytics
set key top left
set xtics rotate by -30
plot for [c=2:$((n + 1))] "$table" using c:xtic(1) title columnheader
EOF
  echo "chart: $out/workloads.png" >&2
else
  echo "run.sh: gnuplot missing, no chart (scripts/setup-deps.sh)" >&2
fi
