// Object layer: labels ("mods") name who allocated an object. Each distinct label text
// is interned once into a fixed table, and objects carry the 16-bit id, so the header
// stays 8 bytes. Lookups are lock-free; a new label takes a short lock. Never allocates.
// Depends on nothing above the chunk layer.
#pragma once

#include <cstdint>

namespace achunk {

inline constexpr int LABEL_CAPACITY = 4096;
inline constexpr int LABEL_MAX_LEN = 15;  // longer labels are cut, as OceanBase's ObLabel

// The id of `label` (nullptr or "" means "unlabeled"); interns it on first use. When the
// table is full, new labels share the id of "label_overflow".
uint16_t label_id(const char* label);
// fork(): the table's lock held across the fork.
void label_fork_lock();
void label_fork_unlock();

namespace label_detail {
extern char names[LABEL_CAPACITY][LABEL_MAX_LEN + 1];
}  // namespace label_detail

// The text of an id; never nullptr. Inline: the allocation path compares against it.
inline const char* label_name(uint16_t id) {
  return id < LABEL_CAPACITY ? label_detail::names[id] : "invalid_label";
}

}  // namespace achunk
