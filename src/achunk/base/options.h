// Base layer: the one table of achunk's options (name, owning layer, type, default,
// range, help) and its pure parser. Each option belongs to one layer, which applies it;
// the wiring on top routes a change to that layer alone. Values come from ACHUNK_CONF
// ("key:value,key:value", sizes accept K/M/G/T), from the API and, at run time, from the dump tool.
// A bad entry produces one warning and keeps the default. Never allocates. Depends on nothing else
// inside achunk.
#pragma once

#include <cstddef>
#include <cstdint>

namespace achunk {

enum class OptionType : int { SIZE, BOOL, INT };

// The layer an option belongs to: the one that applies it (AChunkMgr::apply_option for
// the chunk layer's; the wiring keeps the values the upper layers read).
enum class OptionOwner : int { CHUNK, BLOCK, OBJECT, CONTEXT, DROPIN };

// Grouped by owning layer, bottom to top, in the table's order.
enum OptionId : int {
  // chunk
  OPT_MEMORY_LIMIT,
  OPT_MEMORY_CHUNK_CACHE_SIZE,
  OPT_LARGE_CHUNK_CACHE,
  OPT_CHUNK_CACHE_TTL_MS,
  // block
  OPT_SPAN_IDLE_MS,
  // object
  OPT_SHARED_SLAB_BYTES,
  OPT_DEALLOC_MISMATCH,
  // context
  OPT_CONTEXT_USE_PM,
  // drop-in malloc
  OPT_STATS_PRINT,
  OPT_RELEASE_INTERVAL_MS,
  OPT_STATS_REGION,
  OPT_STATS_INTERVAL_MS,
  OPTION_COUNT,
};

struct OptionDef {
  const char* name;
  OptionOwner owner;
  OptionType type;
  int64_t def;
  int64_t min;
  int64_t max;
  const char* help;
  // The default in libachunk_malloc.so, where it differs from `def` (library use).
  int64_t drop_in_def = INT64_MIN;
};

extern const OptionDef OPTION_TABLE[OPTION_COUNT];

struct Options {
  // The library defaults, or the drop-in malloc's.
  explicit Options(bool drop_in = false);
  int64_t operator[](OptionId id) const { return values[id]; }
  int64_t values[OPTION_COUNT];
};

// Index of the option called name[0, len), or -1.
int find_option(const char* name, size_t len);

// Parses text[0, len) as a value of `def`. On failure returns false and writes the
// reason into err (NUL-terminated, never more than err_len bytes).
bool parse_option_value(const OptionDef& def, const char* text, size_t len, int64_t* out, char* err,
                        int64_t err_len);

// Receives each warning line (without newline); the text lives only during the call.
using WarningSink = void (*)(void* ctx, const char* message);

// Applies every valid "key:value" entry of `conf` to *opts, left to right (a later
// entry for the same key wins). Each bad entry is reported once through `sink` and
// leaves that option as it was. Returns the number of warnings.
int parse_conf(const char* conf, Options* opts, WarningSink sink, void* ctx);

}  // namespace achunk
