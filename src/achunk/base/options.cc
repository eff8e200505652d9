#include "achunk/base/options.h"

#include <cstring>

#include "achunk/base/buf_writer.h"

namespace achunk {

namespace {
constexpr int64_t KB = 1024;
constexpr int64_t MB = KB * 1024;
constexpr int64_t GB = MB * 1024;
constexpr int64_t TB = GB * 1024;
}  // namespace

const OptionDef OPTION_TABLE[OPTION_COUNT] = {
    // chunk layer (AChunkMgr)
    {"memory_limit", OptionOwner::CHUNK, OptionType::SIZE, 0, 0, 64 * TB,
     "soft limit on bytes held by the chunk layer, cache included; 0 means no limit"},
    {"memory_chunk_cache_size", OptionOwner::CHUNK, OptionType::SIZE, 0, 0, 64 * TB,
     "most bytes of free chunks kept cached; 0 means adaptive (up to memory_limit)"},
    {"large_chunk_cache", OptionOwner::CHUNK, OptionType::BOOL, 1, 0, 1,
     "also cache chunks of 4-20 MiB (at most half of the remaining cache budget)"},
    {"chunk_cache_ttl_ms", OptionOwner::CHUNK, OptionType::INT, 30000, -1, 86'400'000,
     "a cached chunk idle this long is unmapped by a later free_chunk; -1 disables"},
    // block layer (BlockSet, through its ChunkSource)
    {"span_idle_ms", OptionOwner::BLOCK, OptionType::INT, 1000, -1, 86'400'000,
     "a free span inside a chunk idle this long gives its pages back at a later span free "
     "(or from the release thread); -1: only when an allocation fails"},
    // object layer (ObjectSet)
    {"shared_slab_bytes", OptionOwner::OBJECT, OptionType::SIZE, 0, 0, 64 * MB,
     "each new thread's first this many bytes of objects up to 1 KiB come from slabs all "
     "threads share, so threads that allocate little share pages; 0: every thread carves "
     "slabs of its own from its first object; 64K in the drop-in malloc",
     64 * KB},
    {"dealloc_mismatch", OptionOwner::OBJECT, OptionType::BOOL, 1, 0, 1,
     "report and abort when an object is freed by another call family than the one that "
     "allocated it (free of operator new's, delete of new[]'s, delete or realloc of "
     "malloc's); 0: free it as asked. Only the drop-in malloc's operators new mark objects"},
    // context layer (MemoryContext)
    {"context_use_pm", OptionOwner::CONTEXT, OptionType::BOOL, 1, 0, 1,
     "memory contexts asking for it take pages from their thread's page manager"},
    // drop-in malloc
    {"stats_print", OptionOwner::DROPIN, OptionType::BOOL, 0, 0, 1,
     "the drop-in malloc prints the chunk dump and the usage to stderr at exit"},
    {"release_interval_ms", OptionOwner::DROPIN, OptionType::INT, 0, 0, 3'600'000,
     "a housekeeping thread (started on the first allocation) releases expired cached "
     "chunks and idle free spans and serves the stats region this often; 0 = no thread; "
     "1000 in the drop-in malloc",
     1000},
    {"stats_region", OptionOwner::DROPIN, OptionType::BOOL, 0, 0, 1,
     "publish live counters in a memfd that achunk-dump reads (and takes requests "
     "through); on in the drop-in malloc",
     1},
    {"stats_interval_ms", OptionOwner::DROPIN, OptionType::INT, 0, 0, 86'400'000,
     "the housekeeping thread prints the timestamped [chunk_mgr], [CHUNK_MGR] and [MEMORY] "
     "lines to stderr this often (at its next tick); 0 = never"},
};

Options::Options(bool drop_in) {
  for (int i = 0; i < OPTION_COUNT; ++i) {
    const OptionDef& d = OPTION_TABLE[i];
    values[i] = drop_in && d.drop_in_def != INT64_MIN ? d.drop_in_def : d.def;
  }
}

int find_option(const char* name, size_t len) {
  for (int i = 0; i < OPTION_COUNT; ++i) {
    const char* n = OPTION_TABLE[i].name;
    if (std::strlen(n) == len && std::memcmp(n, name, len) == 0) return i;
  }
  return -1;
}

namespace {

bool equals(const char* text, size_t len, const char* word) {
  return std::strlen(word) == len && std::strncmp(text, word, len) == 0;
}

bool fail(char* err, int64_t err_len, const OptionDef& def, const char* why) {
  BufWriter(err, err_len).str(def.name).str(": ").str(why);
  return false;
}

// Leading sign and decimal digits; rejects empty input and overflow.
bool parse_int(const char* text, size_t len, size_t* used, int64_t* out) {
  size_t i = 0;
  const bool neg = len > 0 && text[0] == '-';
  if (neg) ++i;
  if (i == len || text[i] < '0' || text[i] > '9') return false;
  int64_t v = 0;
  for (; i < len && text[i] >= '0' && text[i] <= '9'; ++i) {
    if (v > (INT64_MAX - (text[i] - '0')) / 10) return false;
    v = v * 10 + (text[i] - '0');
  }
  *used = i;
  *out = neg ? -v : v;
  return true;
}

int64_t unit_multiplier(const char* suffix, size_t len) {
  if (len == 0) return 1;
  // Accept "M", "MB" and "MiB" alike, in either case: all mean 2^20.
  const char c = static_cast<char>(suffix[0] & ~0x20);
  int64_t m = c == 'K' ? KB : c == 'M' ? MB : c == 'G' ? GB : c == 'T' ? TB : 0;
  if (c == 'B' && len == 1) return 1;
  if (m == 0) return 0;
  if (len == 1) return m;
  if (len == 2 && (suffix[1] | 0x20) == 'b') return m;
  if (len == 3 && suffix[1] == 'i' && (suffix[2] | 0x20) == 'b') return m;
  return 0;
}

}  // namespace

bool parse_option_value(const OptionDef& def, const char* text, size_t len, int64_t* out, char* err,
                        int64_t err_len) {
  int64_t v = 0;
  if (def.type == OptionType::BOOL) {
    if (equals(text, len, "true") || equals(text, len, "1") || equals(text, len, "on")) {
      v = 1;
    } else if (equals(text, len, "false") || equals(text, len, "0") || equals(text, len, "off")) {
      v = 0;
    } else {
      return fail(err, err_len, def, "expected true or false");
    }
  } else {
    size_t used = 0;
    if (!parse_int(text, len, &used, &v)) return fail(err, err_len, def, "expected a number");
    if (def.type == OptionType::SIZE) {
      const int64_t m = unit_multiplier(text + used, len - used);
      if (m == 0) return fail(err, err_len, def, "unknown size suffix (use K, M, G or T)");
      // Either sign may overflow ("-9999999999999G" as much as the positive).
      if (v > INT64_MAX / m || v < INT64_MIN / m) {
        return fail(err, err_len, def, "value out of range");
      }
      v *= m;
    } else if (used != len) {
      return fail(err, err_len, def, "trailing characters after the number");
    }
  }
  if (v < def.min || v > def.max) {
    BufWriter w(err, err_len);
    w.str(def.name).str(": value out of range [").num(def.min).str(", ").num(def.max).str("]");
    return false;
  }
  *out = v;
  return true;
}

int parse_conf(const char* conf, Options* opts, WarningSink sink, void* ctx) {
  if (conf == nullptr) return 0;
  int warnings = 0;
  const char* p = conf;
  while (*p != '\0') {
    const char* end = std::strchr(p, ',');
    if (end == nullptr) end = p + std::strlen(p);
    const size_t len = static_cast<size_t>(end - p);
    if (len > 0) {
      char err[200];
      err[0] = '\0';
      const char* colon = static_cast<const char*>(std::memchr(p, ':', len));
      const size_t key_len = colon != nullptr ? static_cast<size_t>(colon - p) : len;
      const int id = find_option(p, key_len);
      int64_t v = 0;
      if (colon == nullptr) {
        BufWriter(err, sizeof(err)).str("entry without ':'");
      } else if (id < 0) {
        BufWriter(err, sizeof(err)).str("unknown option");
      } else if (parse_option_value(OPTION_TABLE[id], colon + 1, len - key_len - 1, &v, err,
                                    sizeof(err))) {
        opts->values[id] = v;
      }
      if (err[0] != '\0') {
        ++warnings;
        if (sink != nullptr) {
          char line[400];
          BufWriter w(line, sizeof(line));
          w.str("achunk: ignoring ACHUNK_CONF entry '");
          for (size_t i = 0; i < len && i < 120; ++i) w.ch(p[i]);
          w.str("': ").str(err).str(" (default kept)");
          sink(ctx, line);
        }
      }
    }
    p = *end == ',' ? end + 1 : end;
  }
  return warnings;
}

}  // namespace achunk
