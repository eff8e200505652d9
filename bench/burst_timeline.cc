#include "burst_timeline.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

extern char** environ;

namespace achunk {

BurstStatsHost::BurstStatsHost(AChunkMgr& mgr, ObMallocAllocator& objs, int64_t cache_size,
                               int64_t ttl_ms)
    : mgr_(mgr), objs_(objs) {
  // The values the child set on its chunk manager, so the region shows them.
  options_.values[OPT_MEMORY_CHUNK_CACHE_SIZE] = cache_size;
  options_.values[OPT_CHUNK_CACHE_TTL_MS] = ttl_ms;
  options_.values[OPT_RELEASE_INTERVAL_MS] = 0;
  options_.values[OPT_STATS_REGION] = 1;
}

int64_t BurstStatsHost::option_value(int id) {
  return std::atomic_ref<int64_t>(options_.values[id]).load(std::memory_order_relaxed);
}

// Called from the region's tick, one thread at a time; chunk options reach the manager.
StatsHost::SetResult BurstStatsHost::try_set_option(int id, int64_t value) {
  std::atomic_ref<int64_t>(options_.values[id]).store(value, std::memory_order_relaxed);
  if (OPTION_TABLE[id].owner == OptionOwner::CHUNK) {
    mgr_.apply_option(static_cast<OptionId>(id), options_);
  }
  return SetResult::OK;
}

int BurstStatsHost::collect_ctx(stats::CtxRow* rows, int cap) {
  return collect_ctx_rows(objs_, rows, cap);
}

int64_t BurstStatsHost::wash_spans(bool all) {
  const int64_t idle_us = all ? 0 : objs_.span_idle_us();
  return idle_us >= 0 ? objs_.wash_stale_spans(idle_us) : 0;
}

pid_t start_watcher(const char* tool, const char* dir, char id, pid_t pid) {
  const std::string out = std::string(dir) + "/" + id + ".jsonl";
  const std::string err = std::string(dir) + "/" + id + ".err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  std::string pid_text = std::to_string(pid);
  std::string interval = std::to_string(TIMELINE_INTERVAL_S);
  char* argv[] = {const_cast<char*>(tool),
                  const_cast<char*>("--watch"),
                  const_cast<char*>("--json"),
                  pid_text.data(),
                  interval.data(),
                  nullptr};
  pid_t watcher = -1;
  const int rc = posix_spawn(&watcher, tool, &actions, nullptr, argv, environ);
  posix_spawn_file_actions_destroy(&actions);
  return rc == 0 ? watcher : -1;
}

void stop_watcher(pid_t watcher) {
  if (watcher <= 0) return;
  kill(watcher, SIGTERM);
  waitpid(watcher, nullptr, 0);
}

namespace {

// The number after "key": in a --watch --json row, or -1.
double json_number(const char* line, const char* key) {
  const char* at = std::strstr(line, key);
  return at == nullptr ? -1 : std::strtod(at + std::strlen(key), nullptr);
}

// DIR/<id>.jsonl -> DIR/<id>.dat: seconds, RSS MiB, cache hold MiB, hold MiB.
bool convert(const char* dir, char id, int* rows) {
  const std::string in_path = std::string(dir) + "/" + id + ".jsonl";
  const std::string out_path = std::string(dir) + "/" + id + ".dat";
  std::FILE* in = std::fopen(in_path.c_str(), "r");
  std::FILE* out = in != nullptr ? std::fopen(out_path.c_str(), "w") : nullptr;
  if (out == nullptr) {
    if (in != nullptr) std::fclose(in);
    std::fprintf(stderr, "timeline: cannot convert %s\n", in_path.c_str());
    return false;
  }
  constexpr double MIB = 1 << 20;
  char line[1024];
  *rows = 0;
  std::fprintf(out, "# seconds rss_MiB cache_hold_MiB hold_MiB\n");
  while (std::fgets(line, sizeof(line), in) != nullptr) {
    const double t = json_number(line, "\"elapsed_s\":");
    const double rss = json_number(line, "\"rss\":");
    if (t < 0 || rss < 0) continue;
    std::fprintf(out, "%.3f %.1f %.1f %.1f\n", t, rss / MIB,
                 json_number(line, "\"cache_hold\":") / MIB, json_number(line, "\"hold\":") / MIB);
    ++*rows;
  }
  std::fclose(in);
  return std::fclose(out) == 0;
}

constexpr const char* COLORS[] = {"#d62728", "#1f77b4", "#2ca02c"};

}  // namespace

bool write_timeline(const char* dir, const TimelineSeries* series, int count, int64_t ttl_ms) {
  double burst_start = 1e9;
  double burst_end = 0;
  for (int i = 0; i < count; ++i) {
    int rows = 0;
    if (!convert(dir, series[i].id, &rows)) return false;
    if (rows == 0) std::fprintf(stderr, "timeline: no samples for (%c)\n", series[i].id);
    burst_start = std::min(burst_start, series[i].burst_start_s);
    burst_end = std::max(burst_end, series[i].quiet_start_s);
  }
  const std::string gp_path = std::string(dir) + "/timeline.gp";
  std::FILE* gp = std::fopen(gp_path.c_str(), "w");
  if (gp == nullptr) {
    std::fprintf(stderr, "timeline: cannot write %s\n", gp_path.c_str());
    return false;
  }
  std::fprintf(gp,
               "set terminal pngcairo size 1200,650 font ',10'\nset output '%s/timeline.png'\n"
               "set title 'burst then quiet: RSS (solid) and chunk cache hold (dashed) per "
               "setting, sampled every %.1f s with achunk-dump --watch'\n"
               "set xlabel 'seconds'\nset ylabel 'MiB'\nset grid\nset key outside right top\n"
               "set object 1 rect from %.3f, graph 0 to %.3f, graph 1 fc rgb '#eeeeee' "
               "fs solid 1.0 noborder behind\nset label 1 'burst' at %.3f, graph 0.97 center\n",
               dir, TIMELINE_INTERVAL_S, burst_start, burst_end, (burst_start + burst_end) / 2);
  // The TTL: a chunk cached at the end of a setting's burst expires this long after it.
  for (int i = 0, n = 0; i < count; ++i) {
    if (!series[i].evicts) continue;
    const double x = series[i].quiet_start_s + static_cast<double>(ttl_ms) / 1000;
    std::fprintf(gp,
                 "set arrow from %.3f, graph 0 to %.3f, graph 1 nohead dt 3 lw 1.5 lc rgb '%s'\n"
                 "set label %d '(%c) burst end + %.0f s TTL' at %.3f, graph %.2f left "
                 "offset 0.5,0 tc rgb '%s'\n",
                 x, x, COLORS[i % 3], 2 + n, series[i].id, static_cast<double>(ttl_ms) / 1000, x,
                 0.9 - 0.05 * n, COLORS[i % 3]);
    ++n;
  }
  std::fprintf(gp, "plot ");
  for (int i = 0; i < count; ++i) {
    const TimelineSeries& s = series[i];
    std::fprintf(gp,
                 "%s'%s/%c.dat' using 1:2 with lines lw 2 lc rgb '%s' title '(%c) %s: RSS', "
                 "'' using 1:3 with lines lw 2 dt 2 lc rgb '%s' title '(%c) cache hold'",
                 i == 0 ? "" : ", ", dir, s.id, COLORS[i % 3], s.id, s.name, COLORS[i % 3], s.id);
  }
  std::fprintf(gp, "\n");
  return std::fclose(gp) == 0;
}

}  // namespace achunk
