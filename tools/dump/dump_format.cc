#include "tools/dump/dump_format.h"

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace achunk::dump {

namespace {

constexpr char MGR[] = "chunk_mgr.";
constexpr char CACHE[] = "cache.";
constexpr char OPTION[] = "option.";

// The [OS_PARAMS] part of the [chunk_mgr] line, not a column of it.
bool os_param(const std::string& name) {
  return name == "chunk_mgr.max_map_count" || name == "chunk_mgr.transparent_hugepages";
}

// "cache.4mb.hold" -> size 4, field "hold".
bool split_cache(const std::string& name, int* size_mb, std::string* field) {
  if (!absl::StartsWith(name, CACHE)) return false;
  const size_t mb = name.find("mb.", sizeof(CACHE) - 1);
  if (mb == std::string::npos) return false;
  *field = name.substr(mb + 3);
  return absl::SimpleAtoi(name.substr(sizeof(CACHE) - 1, mb - (sizeof(CACHE) - 1)), size_mb);
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppendFormat(&out, "\\u%04x", c);
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// The usage print's spans line, in its order; free_resident (no member) is the row's own.
struct SpanColumn {
  const char* name;
  int64_t stats::CtxSpans::*member;
};
constexpr SpanColumn SPAN_COLUMNS[] = {
    {"slabs", &stats::CtxSpans::slabs},
    {"slab_slots", &stats::CtxSpans::slab_slots},
    {"slab_live", &stats::CtxSpans::slab_live},
    {"empty_slabs", &stats::CtxSpans::empty_slabs},
    {"slab_resident", &stats::CtxSpans::slab_resident},
    {"big", &stats::CtxSpans::big},
    {"big_resident", &stats::CtxSpans::big_resident},
    {"other", &stats::CtxSpans::other},
    {"free_resident", nullptr},
    {"spares_reclaimed", &stats::CtxSpans::spares_reclaimed},
    {"warm_slabs", &stats::CtxSpans::warm_slabs},
};

int64_t span_value(const CtxRow& c, const SpanColumn& col) {
  return col.member == nullptr ? c.free_resident : c.spans.*col.member;
}

double mib(int64_t bytes) {
  return static_cast<double>(bytes) / (1 << 20);
}

}  // namespace

std::string grouped(int64_t v) {
  const uint64_t m = v < 0 ? ~static_cast<uint64_t>(v) + 1 : static_cast<uint64_t>(v);
  std::string digits = absl::StrCat(m);
  std::string out;
  for (size_t i = 0; i < digits.size(); ++i) {
    if (i > 0 && (digits.size() - i) % 3 == 0) out += ',';
    out += digits[i];
  }
  return v < 0 ? "-" + out : out;
}

std::string format_text(const Snapshot& s) {
  std::string out = "[chunk_mgr]";
  for (const Field& f : s.fields) {
    if (!absl::StartsWith(f.name, MGR) || os_param(f.name) || f.is_string) continue;
    absl::StrAppendFormat(&out, " %s=%15s", f.name.substr(sizeof(MGR) - 1), grouped(f.value));
  }
  const Field* thp = s.find("chunk_mgr.transparent_hugepages");
  absl::StrAppendFormat(&out, " [OS_PARAMS] vm.max_map_count=%d transparent_hugepages=%s\n",
                        s.get("chunk_mgr.max_map_count"), thp != nullptr ? thp->text : "unknown");
  int line_mb = -1;
  for (const Field& f : s.fields) {
    int size_mb = 0;
    std::string field;
    if (!split_cache(f.name, &size_mb, &field)) continue;
    if (size_mb != line_mb) {
      if (line_mb >= 0) out += '\n';
      // Size 0 is the huge slot (region 1.3).
      if (size_mb == 0) {
        out += "[CHUNK_MGR] >20 MB_CACHE:";
      } else {
        absl::StrAppendFormat(&out, "[CHUNK_MGR] %2d MB_CACHE:", size_mb);
      }
      line_mb = size_mb;
    }
    absl::StrAppendFormat(&out, " %s=%15s", field, grouped(f.value));
  }
  if (line_mb >= 0) out += '\n';
  if (s.find("thread_states") != nullptr) {  // since region 1.2
    absl::StrAppendFormat(&out, "[THREAD_STATES] in_use=%8s free=%8s washed=%8s\n",
                          grouped(s.get("thread_states")), grouped(s.get("thread_states_free")),
                          grouped(s.get("thread_states_washed")));
  }
  if (s.find("lock_sleeps") != nullptr) {  // since region 1.8
    absl::StrAppendFormat(&out, "[LOCKS] sleeps=%s\n", grouped(s.get("lock_sleeps")));
  }
  if (s.find("overhead") != nullptr) {  // since region 1.9: as the usage print's first line
    absl::StrAppendFormat(&out,
                          "[MEMORY] overhead=%15s thread_states=%15s thread_heaps=%15s "
                          "chunk_headers=%15s stats_region=%15s\n",
                          grouped(s.get("overhead")), grouped(s.get("overhead.thread_states")),
                          grouped(s.get("overhead.thread_heaps")),
                          grouped(s.get("overhead.chunk_headers")),
                          grouped(s.get("overhead.stats_region")));
  }
  // The usage dump's names; -1: not measured yet (no housekeeping thread, or a 1.0 region).
  const int64_t usage_age_ms = s.get("usage_age_ms", -1);
  // Each ctx's spans line as the usage print has it, from a region that carries it, and
  // dated as the ctx line is.
  const bool has_spans = s.major > 1 || s.minor >= 7;
  for (const CtxRow& c : s.ctxs) {
    absl::StrAppendFormat(&out, "[MEMORY] tenant_id=%5d ctx_id=%s hold=%15s used=%15s limit=%15s",
                          c.tenant_id, c.ctx_name, grouped(c.hold), grouped(c.used),
                          grouped(c.limit));
    // The usage figures are the last scan's: their age goes on the line they are read on.
    absl::StrAppendFormat(&out,
                          " free_spans=%15s washed=%15s free_resident=%15s usage_hold=%15s"
                          " usage_age_ms=%8s",
                          grouped(c.free_spans), grouped(c.washed), grouped(c.free_resident),
                          grouped(c.usage_hold), grouped(usage_age_ms));
    absl::StrAppendFormat(&out, " tenant_hold=%15s tenant_limit=%15s\n", grouped(c.tenant_hold),
                          grouped(c.tenant_limit));
    if (!has_spans) continue;
    absl::StrAppendFormat(&out, "[MEMORY] ctx_id=%s", c.ctx_name);
    for (const SpanColumn& col : SPAN_COLUMNS) {
      absl::StrAppendFormat(&out, " %s=%15s", col.name, grouped(span_value(c, col)));
    }
    absl::StrAppendFormat(&out, " usage_age_ms=%8s\n", grouped(usage_age_ms));
  }
  for (const LabelRow& l : s.labels) {
    absl::StrAppendFormat(&out,
                          "[TOP_LABELS] tenant_id=%5d ctx_id=%s hold=%15s used=%15s count=%8s "
                          "mod=%s\n",
                          l.tenant_id, l.ctx_name, grouped(l.hold), grouped(l.used),
                          grouped(l.count), l.label);
  }
  for (const Field& f : s.fields) {
    if (!absl::StartsWith(f.name, OPTION)) continue;
    absl::StrAppendFormat(&out, "[OPTIONS] %s=%d\n", f.name.substr(sizeof(OPTION) - 1), f.value);
  }
  return out;
}

std::string format_json(const Snapshot& s) {
  std::string out = absl::StrFormat(
      "{\"version\":\"%s\",\"region_version\":\"%d.%d\",\"pid\":%d,\"refreshes\":%d,"
      "\"chunk_mgr\":{",
      FORMAT_VERSION, s.major, s.minor, s.pid, s.refreshes);
  const char* sep = "";
  for (const Field& f : s.fields) {
    if (!absl::StartsWith(f.name, MGR)) continue;
    const std::string name = f.name.substr(sizeof(MGR) - 1);
    absl::StrAppend(&out, sep, json_string(name), ":",
                    f.is_string ? json_string(f.text) : absl::StrCat(f.value));
    sep = ",";
  }
  out += "},\"caches\":[";
  int line_mb = -1;
  for (const Field& f : s.fields) {
    int size_mb = 0;
    std::string field;
    if (!split_cache(f.name, &size_mb, &field)) continue;
    if (size_mb != line_mb) {
      absl::StrAppend(&out, line_mb >= 0 ? "},{" : "{", "\"size_mb\":", size_mb);
      line_mb = size_mb;
    }
    absl::StrAppend(&out, ",", json_string(field), ":", f.value);
  }
  out += line_mb >= 0 ? "}],\"ctx\":[" : "],\"ctx\":[";
  sep = "";
  for (const CtxRow& c : s.ctxs) {
    absl::StrAppendFormat(&out,
                          "%s{\"tenant_id\":%d,\"ctx_id\":%d,\"ctx\":%s,\"hold\":%d,\"used\":%d,"
                          "\"limit\":%d,\"free_spans\":%d,\"washed\":%d,\"free_resident\":%d,"
                          "\"usage_hold\":%d,\"tenant_hold\":%d,\"tenant_limit\":%d}",
                          sep, c.tenant_id, c.ctx_id, json_string(c.ctx_name), c.hold, c.used,
                          c.limit, c.free_spans, c.washed, c.free_resident, c.usage_hold,
                          c.tenant_hold, c.tenant_limit);
    out.pop_back();  // the row's closing brace: its spans go inside
    out += ",\"spans\":{";
    for (const SpanColumn& col : SPAN_COLUMNS) {
      absl::StrAppend(&out, &col == SPAN_COLUMNS ? "" : ",", json_string(col.name), ":",
                      span_value(c, col));
    }
    out += "}}";
    sep = ",";
  }
  out += "],\"top_labels\":[";
  sep = "";
  for (const LabelRow& l : s.labels) {
    absl::StrAppendFormat(&out,
                          "%s{\"tenant_id\":%d,\"ctx_id\":%d,\"ctx\":%s,\"mod\":%s,\"hold\":%d,"
                          "\"used\":%d,\"count\":%d}",
                          sep, l.tenant_id, l.ctx_id, json_string(l.ctx_name), json_string(l.label),
                          l.hold, l.used, l.count);
    sep = ",";
  }
  out += "],\"options\":{";
  sep = "";
  for (const Field& f : s.fields) {
    if (!absl::StartsWith(f.name, OPTION)) continue;
    absl::StrAppend(&out, sep, json_string(f.name.substr(sizeof(OPTION) - 1)), ":", f.value);
    sep = ",";
  }
  absl::StrAppendFormat(&out,
                        "},\"ctx_count\":%d,\"requests_served\":%d,"
                        "\"housekeeping_running\":%d,\"usage_scans\":%d,\"usage_age_ms\":%d",
                        s.get("ctx_count", 0), s.get("requests_served", 0),
                        s.get("housekeeping_running", 0), s.get("usage_scans", 0),
                        s.get("usage_age_ms", -1));
  // -1: a region older than 1.2.
  absl::StrAppendFormat(&out,
                        ",\"thread_states\":%d,\"thread_states_free\":%d,"
                        "\"thread_states_washed\":%d,\"lock_sleeps\":%d",
                        s.get("thread_states", -1), s.get("thread_states_free", -1),
                        s.get("thread_states_washed", -1), s.get("lock_sleeps", -1));
  // -1: a region older than 1.9.
  absl::StrAppendFormat(&out,
                        ",\"overhead\":{\"total\":%d,\"thread_states\":%d,\"thread_heaps\":%d,"
                        "\"chunk_headers\":%d,\"stats_region\":%d}}\n",
                        s.get("overhead", -1), s.get("overhead.thread_states", -1),
                        s.get("overhead.thread_heaps", -1), s.get("overhead.chunk_headers", -1),
                        s.get("overhead.stats_region", -1));
  return out;
}

WatchRow watch_row(const Snapshot& prev, const Snapshot& cur, double seconds,
                   const std::string& time) {
  WatchRow r;
  r.time = time;
  r.rss = cur.get("chunk_mgr.resident_size");
  r.hold = cur.get("chunk_mgr.hold");
  r.used = cur.get("chunk_mgr.used");
  r.cache_hold = cur.get("chunk_mgr.freelists_hold");
  r.cache_resident = cur.get("chunk_mgr.cache_resident");
  r.cap = cur.get("chunk_mgr.max_chunk_cache_size");
  r.limit = cur.get("chunk_mgr.limit");
  r.cache_2mb_count = cur.get("cache.2mb.count");
  auto delta = [&](const char* name) {
    return static_cast<double>(cur.get(name, 0) - prev.get(name, 0));
  };
  const double dt = seconds > 0 ? seconds : 1;
  r.maps_per_s = delta("chunk_mgr.total_maps") / dt;
  r.unmaps_per_s = delta("chunk_mgr.total_unmaps") / dt;
  r.expired_per_s = delta("chunk_mgr.expired_unmaps") / dt;
  const double hits = delta("chunk_mgr.cache_hits");
  const double lookups = hits + delta("chunk_mgr.cache_misses");
  r.hit_pct = lookups > 0 ? 100.0 * hits / lookups : -1;
  return r;
}

std::string watch_header() {
  return absl::StrFormat("%8s %9s %9s %9s %9s %9s %9s %9s %8s %8s %8s %6s %5s\n", "time", "rss_MiB",
                         "hold_MiB", "used_MiB", "cache_MiB", "cres_MiB", "cap_MiB", "limit_MiB",
                         "maps/s", "unmaps/s", "expir/s", "hit%", "2MB#");
}

std::string format_watch_row(const WatchRow& r) {
  auto limit = [](int64_t v) {
    return v == INT64_MAX ? std::string("-") : absl::StrFormat("%.1f", mib(v));
  };
  const std::string hit = r.hit_pct < 0 ? "-" : absl::StrFormat("%.1f", r.hit_pct);
  return absl::StrFormat("%8s %9.1f %9.1f %9.1f %9.1f %9.1f %9s %9s %8.1f %8.1f %8.1f %6s %5d\n",
                         r.time, mib(r.rss), mib(r.hold), mib(r.used), mib(r.cache_hold),
                         mib(r.cache_resident), limit(r.cap), limit(r.limit), r.maps_per_s,
                         r.unmaps_per_s, r.expired_per_s, hit, r.cache_2mb_count);
}

std::string format_watch_json(const WatchRow& r) {
  return absl::StrFormat(
      "{\"version\":\"%s\",\"time\":\"%s\",\"elapsed_s\":%.3f,\"rss\":%d,\"hold\":%d,\"used\":%d,"
      "\"cache_hold\":%d,"
      "\"cache_resident\":%d,\"cap\":%d,\"limit\":%d,\"maps_per_s\":%.2f,\"unmaps_per_s\":%.2f,"
      "\"expired_unmaps_per_s\":%.2f,\"hit_pct\":%.2f,\"cache_2mb_count\":%d}\n",
      FORMAT_VERSION, r.time, r.elapsed_s, r.rss, r.hold, r.used, r.cache_hold, r.cache_resident,
      r.cap, r.limit, r.maps_per_s, r.unmaps_per_s, r.expired_per_s, r.hit_pct, r.cache_2mb_count);
}

std::string watch_plot_data(const std::vector<WatchRow>& rows) {
  std::string out = "# x hold used cache rss maps_per_s unmaps_per_s\n";
  for (const WatchRow& r : rows) {
    absl::StrAppendFormat(&out, "%.3f %.1f %.1f %.1f %.1f %.2f %.2f\n", r.elapsed_s, mib(r.hold),
                          mib(r.used), mib(r.cache_hold), mib(r.rss), r.maps_per_s, r.unmaps_per_s);
  }
  return out;
}

}  // namespace achunk::dump
