// The live stats region's layout, shared by the writer inside the process
// (stats_region.cc) and by achunk-dump, which maps it from outside. Little-endian, fixed
// offsets, counters only (never pointers). A reader finds every value through the field
// table, so fields are only ever added (minor version); the major version changes only
// when something already published moves. Depends on nothing.
#pragma once

#include <cstddef>
#include <cstdint>

namespace achunk::stats {

inline constexpr uint64_t MAGIC = 0x5453'4b4e'5548'4341ULL;  // "ACHUNKST", little-endian
inline constexpr uint16_t MAJOR = 1;
inline constexpr uint16_t MINOR = 9;  // 1.9: overhead and its parts
inline constexpr char MEMFD_NAME[] = "achunk-stats";
inline constexpr int64_t REGION_SIZE = 32 * 1024;

// Header of the region; `seq` is the sequence lock over the data, ctx and label sections
// (odd while the process writes them).
struct Header {
  uint64_t magic;
  uint16_t major;
  uint16_t minor;
  uint32_t header_size;
  uint64_t region_size;
  int64_t pid;
  int64_t start_time;    // field 22 of /proc/PID/stat: clock ticks after boot
  uint64_t generation;   // non-zero while the process lives; 0 once it exits
  uint64_t seq;          // even: the data is stable; odd: being written
  int64_t heartbeat_ns;  // CLOCK_MONOTONIC of the last refresh
  uint64_t refreshes;
  uint32_t field_offset;  // the field table: field_count entries of FieldDesc
  uint32_t field_count;
  uint32_t data_offset;
  uint32_t data_size;
  uint32_t ctx_offset;  // ctx_capacity rows of CtxRow; data field ctx_count says how many
  uint32_t ctx_capacity;
  uint32_t ctx_stride;
  uint32_t control_offset;
  uint32_t control_size;
  uint32_t label_offset;  // since 1.1: label_capacity rows of LabelRow; data field label_count
  uint32_t label_capacity;
  uint32_t label_stride;
  uint32_t reserved[10];
};
static_assert(sizeof(Header) == 160);

enum class FieldType : uint16_t { I64 = 1, STR = 2 };
enum class FieldUnit : uint16_t { NONE = 0, BYTES = 1, COUNT = 2, MS = 3, BOOL = 4 };

struct FieldDesc {
  char name[48];  // NUL-terminated
  FieldType type;
  FieldUnit unit;
  uint32_t offset;  // from the start of the region
  uint32_t size;    // 8 for I64, the buffer size for STR
  uint32_t reserved;
};
static_assert(sizeof(FieldDesc) == 64);

// Since 1.7: the usage dump's spans line for one ctx (SpanUsage; its free_resident is the
// row's own), from the same scan as the row's usage figures; -1 with them.
struct CtxSpans {
  int64_t slabs;
  int64_t slab_slots;
  int64_t slab_live;
  int64_t empty_slabs;
  int64_t slab_resident;
  int64_t big;
  int64_t big_resident;
  int64_t other;
  int64_t spares_reclaimed;
  int64_t warm_slabs;
};
static_assert(sizeof(CtxSpans) == 80);
inline constexpr CtxSpans UNKNOWN_SPANS = {-1, -1, -1, -1, -1, -1, -1, -1, -1, -1};

// One (tenant, ctx) with chunks charged to it. Rows are ctx_stride apart: a reader copies
// min(ctx_stride, its own size) and treats what a 1.0 region lacks as unknown.
struct CtxRow {
  uint64_t tenant_id;
  int64_t ctx_id;
  int64_t hold;
  int64_t limit;  // INT64_MAX: none
  int64_t tenant_hold;
  int64_t tenant_limit;
  char ctx_name[16];
  // Since 1.1: the usage dump's figures (CtxUsage), from the last usage scan; -1 until
  // the housekeeping thread made one.
  int64_t used;
  int64_t free_spans;
  int64_t washed;
  int64_t free_resident;
  // Since 1.4: the ctx's hold when that scan measured it, which the figures above add up
  // against (`hold` is the refresh's, and may have moved since); -1 with them.
  int64_t usage_hold;
  CtxSpans spans;  // since 1.7
};
static_assert(sizeof(CtxRow) == 184);
inline constexpr uint32_t CTX_ROW_SIZE_1_0 = 64;

// Since 1.1: one of the labels with the largest hold in the process, from the last usage
// scan, largest first.
struct LabelRow {
  uint64_t tenant_id;
  int64_t ctx_id;
  int64_t hold;
  int64_t used;
  int64_t count;
  char label[16];  // NUL-terminated; labels are cut at 15 bytes
  char ctx_name[16];
};
static_assert(sizeof(LabelRow) == 72);

enum class ControlOp : uint32_t { NONE = 0, SET_OPTION = 1, RELEASE_EXPIRED = 2, RELEASE_ALL = 3 };
enum class ControlResult : int32_t { OK = 0, BAD_REQUEST = 1, REJECTED = 2 };

// The tool fills op/option/value, then stores req_seq (release); the process answers by
// filling the rest, refreshing the stats, then storing resp_seq = req_seq (release), so
// a snapshot taken after the answer shows its effect. Everything the tool wrote is
// untrusted.
struct Control {
  uint64_t req_seq;
  uint32_t op;
  uint32_t reserved0;
  char option[48];
  char value[48];
  uint64_t resp_seq;
  int32_t result;
  uint32_t reserved1;
  char message[160];
  int64_t before;  // option value before / RSS before a release
  int64_t after;   // option value after / RSS after a release
  int64_t unmapped;
  int64_t washed;
  uint64_t reserved2[4];
};
static_assert(sizeof(Control) == 352);

inline constexpr uint32_t CONTROL_OFFSET = 256;
inline constexpr uint32_t FIELD_OFFSET = 1024;
inline constexpr uint32_t MAX_FIELDS = 192;
inline constexpr uint32_t DATA_OFFSET = FIELD_OFFSET + MAX_FIELDS * sizeof(FieldDesc);
inline constexpr uint32_t DATA_SIZE = 4096;
inline constexpr uint32_t CTX_OFFSET = DATA_OFFSET + DATA_SIZE;
inline constexpr uint32_t CTX_CAPACITY = 64;
inline constexpr uint32_t LABEL_OFFSET = CTX_OFFSET + CTX_CAPACITY * sizeof(CtxRow);
inline constexpr uint32_t LABEL_CAPACITY = 16;
static_assert(CONTROL_OFFSET >= sizeof(Header));
static_assert(CONTROL_OFFSET + sizeof(Control) <= FIELD_OFFSET);
static_assert(LABEL_OFFSET + LABEL_CAPACITY * sizeof(LabelRow) <= REGION_SIZE);

}  // namespace achunk::stats
