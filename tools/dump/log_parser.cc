#include "tools/dump/log_parser.h"

#include <cctype>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"

namespace achunk::dump {

namespace {

constexpr absl::string_view MAIN = "[chunk_mgr]";
constexpr absl::string_view CAPS = "[CHUNK_MGR]";

// "[2026-11-25 03:00:00.123456]" at the start of the line (ISO "T" accepted too).
bool parse_time(absl::string_view line, LogSample* s) {
  if (line.size() < 21 || line[0] != '[') return false;
  const size_t close = line.find(']');
  if (close == absl::string_view::npos || close > 40) return false;
  std::string text(line.substr(1, close - 1));
  absl::Time t;
  std::string err;
  if (!absl::ParseTime("%Y-%m-%d %H:%M:%E*S", text, absl::UTCTimeZone(), &t, &err) &&
      !absl::ParseTime("%Y-%m-%dT%H:%M:%E*S", text, absl::UTCTimeZone(), &t, &err)) {
    return false;
  }
  s->seconds = absl::ToDoubleSeconds(t - absl::UnixEpoch());
  s->time = std::move(text);
  return true;
}

// Every "key=value" after the marker; values may be padded after '=' and grouped.
// False when a value does not parse (a line cut short or overwritten).
bool parse_pairs(absl::string_view rest, std::map<std::string, int64_t>* out) {
  size_t i = 0;
  while (i < rest.size()) {
    const size_t eq = rest.find('=', i);
    if (eq == absl::string_view::npos) break;
    size_t k = eq;
    while (k > i && (std::isalnum(static_cast<unsigned char>(rest[k - 1])) || rest[k - 1] == '_' ||
                     rest[k - 1] == '.')) {
      --k;
    }
    const std::string key(rest.substr(k, eq - k));
    size_t v = eq + 1;
    while (v < rest.size() && rest[v] == ' ') ++v;
    size_t end = v;
    while (end < rest.size() && rest[end] != ' ') ++end;
    const absl::string_view value = rest.substr(v, end - v);
    i = end;
    if (key.empty()) return false;
    if (key == "vm.max_map_count" || key == "transparent_hugepages") continue;
    int64_t n = 0;
    if (!parse_grouped(value, &n)) return false;
    (*out)[key == "freelist_hold" ? "freelists_hold" : key] = n;
  }
  return !out->empty();
}

double mib(int64_t v) {
  return static_cast<double>(v) / (1 << 20);
}

int64_t value(const LogSample& s, const char* name) {
  auto it = s.values.find(name);
  return it == s.values.end() ? -1 : it->second;
}

}  // namespace

bool parse_grouped(absl::string_view text, int64_t* out) {
  bool neg = false;
  if (!text.empty() && text[0] == '-') {
    neg = true;
    text.remove_prefix(1);
  }
  if (text.empty() || text.size() > 30) return false;
  // 1-3 digits, then groups of exactly three ("%'15ld"), or plain digits.
  std::string digits;
  const std::vector<absl::string_view> groups = absl::StrSplit(text, ',');
  for (size_t g = 0; g < groups.size(); ++g) {
    const size_t n = groups[g].size();
    if (groups.size() > 1 && (g == 0 ? n == 0 || n > 3 : n != 3)) return false;
    digits.append(groups[g].data(), n);
  }
  if (digits.empty()) return false;
  for (char c : digits) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return false;
  }
  uint64_t v = 0;
  if (!absl::SimpleAtoi(digits, &v) || v > static_cast<uint64_t>(INT64_MAX) + (neg ? 1 : 0)) {
    return false;
  }
  *out = neg ? static_cast<int64_t>(0 - v) : static_cast<int64_t>(v);
  return true;
}

void parse_log_line(absl::string_view line, LogTimeline* t) {
  ++t->lines;
  size_t at = line.find(MAIN);
  if (at == absl::string_view::npos) at = line.find(CAPS);
  if (at == absl::string_view::npos) return;
  absl::string_view rest = line.substr(at + MAIN.size());
  const size_t mb = rest.find("MB_CACHE:");
  if (mb != absl::string_view::npos) {
    // A continuation line: belongs to the last sample.
    std::map<std::string, int64_t> cache;
    if (t->samples.empty() || !parse_pairs(rest.substr(mb + 9), &cache)) {
      ++t->skipped;
      return;
    }
    ++t->samples.back().cache_lines;
    return;
  }
  const size_t os = rest.find("[OS_PARAMS]");
  LogSample s;
  if (!parse_pairs(rest.substr(0, os), &s.values) || s.values.count("hold") == 0) {
    ++t->skipped;
    return;
  }
  parse_time(line, &s);
  t->samples.push_back(std::move(s));
}

std::string format_log_summary(const LogTimeline& t) {
  std::string out = absl::StrFormat("%d lines, %d samples, %d skipped (garbage or cut short)\n",
                                    t.lines, t.samples.size(), t.skipped);
  if (t.samples.empty()) return out;
  const LogSample& first = t.samples.front();
  const LogSample& last = t.samples.back();
  if (!first.time.empty()) absl::StrAppendFormat(&out, "from %s to %s\n", first.time, last.time);
  absl::StrAppendFormat(&out, "%-20s %14s %14s %14s %14s\n", "field (MiB)", "first", "min", "max",
                        "last");
  for (const char* f : {"hold", "used", "freelists_hold", "resident_size"}) {
    int64_t lo = INT64_MAX;
    int64_t hi = INT64_MIN;
    for (const LogSample& s : t.samples) {
      const int64_t v = value(s, f);
      if (v < 0) continue;
      lo = std::min(lo, v);
      hi = std::max(hi, v);
    }
    if (hi < 0) continue;
    absl::StrAppendFormat(&out, "%-20s %14.1f %14.1f %14.1f %14.1f\n", f, mib(value(first, f)),
                          mib(lo), mib(hi), mib(value(last, f)));
  }
  for (const char* f : {"total_maps", "total_unmaps", "expired_unmaps"}) {
    if (value(first, f) < 0 || value(last, f) < 0) continue;
    absl::StrAppendFormat(&out, "%-20s %d over the log\n", f, value(last, f) - value(first, f));
  }
  return out;
}

std::string log_plot_data(const LogTimeline& t) {
  std::string out = "# x hold used cache rss maps_per_s unmaps_per_s\n";
  const double t0 = t.samples.empty() ? 0 : t.samples.front().seconds;
  for (size_t i = 0; i < t.samples.size(); ++i) {
    const LogSample& s = t.samples[i];
    const bool timed = s.seconds >= 0 && t0 >= 0;
    const double x = timed ? s.seconds - t0 : static_cast<double>(i);
    double maps = 0;
    double unmaps = 0;
    if (i > 0) {
      const LogSample& p = t.samples[i - 1];
      const double dt =
          timed && p.seconds >= 0 && s.seconds > p.seconds ? s.seconds - p.seconds : 1;
      maps = static_cast<double>(value(s, "total_maps") - value(p, "total_maps")) / dt;
      unmaps = static_cast<double>(value(s, "total_unmaps") - value(p, "total_unmaps")) / dt;
    }
    absl::StrAppendFormat(&out, "%.3f %.1f %.1f %.1f %.1f %.2f %.2f\n", x, mib(value(s, "hold")),
                          mib(value(s, "used")), mib(value(s, "freelists_hold")),
                          mib(value(s, "resident_size")), maps, unmaps);
  }
  return out;
}

}  // namespace achunk::dump
