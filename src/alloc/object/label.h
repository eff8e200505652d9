// Object layer: labels ("mods") name who allocated an object. Each distinct label text
// is interned once into a fixed table, and objects carry the 16-bit id, so the header
// stays 8 bytes. Lookups are lock-free; a new label takes a short lock. Never allocates.
// Depends on nothing above the chunk layer.
#pragma once

#include <cstdint>
#include <cstring>

#include "achunk/base/fork_locks.h"
#include "alloc/object/aobject.h"

namespace achunk {

inline constexpr int LABEL_CAPACITY = 4096;
inline constexpr int LABEL_MAX_LEN = 15;  // longer labels are cut, as OceanBase's ObLabel
static_assert(LABEL_CAPACITY - 1 <= LABEL_ID_MASK, "a label id fits its header field");

// The id of `label` (nullptr or "" means "unlabeled"); interns it on first use. When the
// table is full, new labels share the id of "label_overflow".
uint16_t label_id(const char* label);
// label_id through a per-thread cache keyed by the label pointer (labels are almost
// always literals), checked against the 16 bytes at the pointer, so a hit costs no
// hashing and a buffer rewritten with other text is looked up again.
uint16_t label_id_cached(const char* label);
// fork(): the table's lock held across the fork.
void label_visit_fork_locks(ForkLockVisitor& v);

namespace label_detail {
extern char names[LABEL_CAPACITY][LABEL_MAX_LEN + 1];
}  // namespace label_detail

// The text of an id; never nullptr. Inline: the allocation path compares against it.
inline const char* label_name(uint16_t id) {
  return id < LABEL_CAPACITY ? label_detail::names[id] : "invalid_label";
}

// The 16 bytes at a non-null `label` that read_label_bytes already found readable (a
// pointer's offset in its page never changes, so it stays readable).
__attribute__((no_sanitize("address"))) inline void read_label_bytes_unchecked(const char* label,
                                                                               uint64_t out[2]) {
  // Hide the object's bounds from the compiler, which would rightly warn about them.
  asm("" : "+r"(label));
  std::memcpy(out, label, 16);
}

// The 16 bytes at `label` (zeros for no label): the text, its NUL and what follows, so
// equal bytes mean equal text. They may pass the end of a short label but never a page
// boundary (false when they would), so the read never faults; ASan would still call it
// an overflow, so it is not instrumented.
__attribute__((no_sanitize("address"))) inline bool read_label_bytes(const char* label,
                                                                     uint64_t out[2]) {
  if (label == nullptr) {
    out[0] = out[1] = 0;
    return true;
  }
  if ((reinterpret_cast<uintptr_t>(label) & 4095) > 4096 - 16) return false;
  read_label_bytes_unchecked(label, out);
  return true;
}

}  // namespace achunk
