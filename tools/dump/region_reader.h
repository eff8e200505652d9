// achunk-dump, the reader: finds a process's live stats region through /proc/PID/fd,
// maps it, copies a consistent snapshot under its sequence lock, checks every size and
// offset before use, and sends control requests. Knows the layout only from
// global/stats_layout.h; never links the allocator. Depends on abseil.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "global/stats_layout.h"

namespace achunk::dump {

struct Field {
  std::string name;
  stats::FieldUnit unit = stats::FieldUnit::NONE;
  bool is_string = false;
  int64_t value = 0;
  std::string text;  // for string fields
};

struct CtxRow {
  uint64_t tenant_id = 0;
  int64_t ctx_id = 0;
  std::string ctx_name;
  int64_t hold = 0;
  int64_t limit = 0;
  int64_t tenant_hold = 0;
  int64_t tenant_limit = 0;
  // From the last usage scan; -1: not measured yet, or a 1.0 region.
  int64_t used = -1;
  int64_t free_spans = -1;
  int64_t washed = -1;
  int64_t free_resident = -1;
  // The ctx's hold when that scan measured it (region 1.4 on); -1 as above.
  int64_t usage_hold = -1;
  // The usage dump's spans line, from the same scan (region 1.7 on); -1 as above.
  stats::CtxSpans spans = stats::UNKNOWN_SPANS;
};

// One of the labels with the largest hold (region 1.1 on).
struct LabelRow {
  uint64_t tenant_id = 0;
  int64_t ctx_id = 0;
  std::string ctx_name;
  std::string label;
  int64_t hold = 0;
  int64_t used = 0;
  int64_t count = 0;
};

// One consistent copy of a region, every offset checked.
struct Snapshot {
  uint16_t major = 0;
  uint16_t minor = 0;
  int64_t pid = 0;
  int64_t start_time = 0;
  uint64_t generation = 0;
  int64_t heartbeat_ns = 0;
  uint64_t refreshes = 0;
  std::vector<Field> fields;  // in the region's order
  std::vector<CtxRow> ctxs;
  std::vector<LabelRow> labels;  // largest hold first

  // The value of a 64-bit field, or `missing` when the region has no such field.
  int64_t get(const std::string& name, int64_t missing = -1) const;
  const Field* find(const std::string& name) const;
};

// Validates region bytes [0, size) and decodes them. Any inconsistency (magic, major
// version, a size or offset out of bounds) is an error naming it; never reads outside.
absl::StatusOr<Snapshot> parse_region(const unsigned char* bytes, size_t size);

struct ControlAnswer {
  int32_t result = 0;  // stats::ControlResult
  std::string message;
  int64_t before = 0;
  int64_t after = 0;
  int64_t unmapped = 0;
  int64_t washed = 0;
};

// A mapped region of a live process (or any byte buffer, for tests).
class Region {
 public:
  // Opens PID's region. Refuses another user's process unless `force`.
  static absl::StatusOr<std::unique_ptr<Region>> open_pid(pid_t pid, bool force);
  // Over caller-owned memory (tests).
  static std::unique_ptr<Region> over(unsigned char* bytes, size_t size, pid_t pid);
  ~Region();
  Region(const Region&) = delete;
  Region& operator=(const Region&) = delete;

  // A settled copy, validated, and checked against the live process (generation, pid,
  // start time). `max_tries` bounds the retries while the writer is mid-update.
  absl::StatusOr<Snapshot> snapshot(int max_tries = 1000) const;
  // Writes a request into the control slot and waits for the answer.
  absl::StatusOr<ControlAnswer> request(stats::ControlOp op, const std::string& option,
                                        const std::string& value, absl::Duration timeout);
  pid_t pid() const { return pid_; }

 private:
  Region(unsigned char* bytes, size_t size, pid_t pid, bool owned)
      : bytes_(bytes), size_(size), pid_(pid), owned_(owned) {}
  unsigned char* bytes_;
  size_t size_;
  pid_t pid_;
  bool owned_;
};

// Field 22 of /proc/PID/stat (start time in clock ticks after boot), or -1.
int64_t process_start_time(pid_t pid);
// The process's resident bytes from /proc/PID/statm, or -1.
int64_t process_rss(pid_t pid);
// What a look through /proc finds. A process of another user is listed only with
// `every_user` (root can read any /proc/PID/fd); without it, it is counted as skipped.
struct ProcessScan {
  struct Process {
    pid_t pid;
    uid_t uid;
  };
  std::vector<Process> listed;  // processes with a stats region, ascending
  // Other users' processes that have a region, left out for want of --force.
  std::vector<Process> skipped_with_region;
  // Other users' processes whose descriptors this user cannot read, so nobody can tell
  // whether they have a region.
  int64_t skipped_unreadable = 0;
  // This user's processes it cannot look into, for they hold capabilities it lacks.
  std::vector<Process> unreadable_own;
};
ProcessScan scan_processes(bool every_user);
// The name of user `uid`, or its number when it has none.
std::string user_name(uid_t uid);

}  // namespace achunk::dump
