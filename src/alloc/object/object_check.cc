#include "alloc/object/object_check.h"

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

}  // namespace achunk
