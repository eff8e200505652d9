#include "alloc/object/object_check.h"

#include <atomic>
#include <iterator>

#include "achunk/base/buf_writer.h"
#include "alloc/object/label.h"

namespace achunk {

void report_object(ErrorKind kind, void* ptr, uint64_t header, const char* what) {
  char detail[160];
  BufWriter w(detail, sizeof(detail));
  w.str(what).str(" (size=").num(header_size(header)).str(" label=");
  w.str(label_name(header_label(header))).ch(')');
  report_error(kind, ptr, detail);
}

uint64_t live_header(void* ptr, bool also_big_aligned) {
  const uint64_t h = load_header(ptr);
  switch (header_state(h)) {
    case ObjectState::IN_USE:
      return h;
    case ObjectState::BIG:
    case ObjectState::ALIGNED:
      if (also_big_aligned) return h;
      break;
    case ObjectState::FREE:
      report_object(ErrorKind::DOUBLE_FREE, ptr, h, "object is already free");
      return 0;
  }
  report_error(ErrorKind::INVALID_FREE, ptr, "no object header (bad magic)");
  return 0;
}

bool check_tail(void* ptr, uint64_t header, int64_t size, const char* what) {
  if (tail_intact(ptr, size)) return true;
  report_object(ErrorKind::CORRUPTION, ptr, header, what);
  return false;
}

namespace {
std::atomic<bool> g_report_mismatch{true};

// Per AllocOrigin: the call that allocates, the call that frees.
constexpr const char* ORIGIN_CALLS[][2] = {{"malloc", "free"},
                                           {"operator new", "operator delete"},
                                           {"operator new[]", "operator delete[]"}};
// A corrupted header may carry the fourth value of the two bits.
const char* origin_call(AllocOrigin origin, int which) {
  const auto i = static_cast<size_t>(origin);
  return i < std::size(ORIGIN_CALLS) ? ORIGIN_CALLS[i][which] : "an unknown call";
}
}  // namespace

void set_report_dealloc_mismatch(bool on) {
  g_report_mismatch.store(on, std::memory_order_relaxed);
}
bool report_dealloc_mismatch() {
  return g_report_mismatch.load(std::memory_order_relaxed);
}

const char* dealloc_name(AllocOrigin origin) {
  return origin_call(origin, 1);
}

bool origin_matches(void* ptr, uint64_t header, AllocOrigin origin, const char* freed_by) {
  const AllocOrigin had = header_origin(header);
  if (had == origin || !report_dealloc_mismatch()) return true;
  char detail[200];
  BufWriter w(detail, sizeof(detail));
  w.str("allocated by ").str(origin_call(had, 0)).str(", freed by ").str(freed_by);
  // An aligned pointer's pad holds an offset, not the object's size and label.
  if (header_state(header) != ObjectState::ALIGNED) {
    w.str(" (size=").num(header_size(header)).str(" label=");
    w.str(label_name(header_label(header))).ch(')');
  }
  w.str("; dealloc_mismatch:0 lets it pass");
  report_error(ErrorKind::DEALLOC_MISMATCH, ptr, detail);
  return false;
}

}  // namespace achunk
