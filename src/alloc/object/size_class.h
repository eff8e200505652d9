// Object layer: the size classes small objects are carved in. A slot holds the 8-byte
// header, the user bytes and the 8-byte tail canary, and is a multiple of 16 so every
// user pointer is 16-byte aligned. Classes step by 16 bytes up to 128 and by a quarter
// of the power of two above (at most 25% internal waste). Depends on aobject.h.
#pragma once

#include <cstdint>

#include "alloc/object/aobject.h"

namespace achunk {

inline constexpr int64_t SMALL_SLOT_MAX = 65536;
inline constexpr int64_t SMALL_OBJECT_MAX = SMALL_SLOT_MAX - AOBJECT_META_SIZE;

// Class table: 32..128 by 16 (7 classes), then 4 per doubling up to 65536 (36 classes).
inline constexpr int SIZE_CLASS_COUNT = 7 + 4 * 9;

constexpr int64_t class_slot_formula(int sc) {
  if (sc < 7) return 32 + 16 * sc;
  const int k = sc - 7;  // 0 -> 160
  const int64_t base = int64_t{128} << (k / 4);
  return base + (base / 4) * (k % 4 + 1);
}
// From a table: the allocation paths look a slot size up for every object they carve.
struct ClassSlotTable {
  int32_t slot[SIZE_CLASS_COUNT];
  constexpr ClassSlotTable() : slot() {
    for (int sc = 0; sc < SIZE_CLASS_COUNT; ++sc)
      slot[sc] = static_cast<int32_t>(class_slot_formula(sc));
  }
};
inline constexpr ClassSlotTable CLASS_SLOT_TABLE{};
constexpr int64_t class_slot_size(int sc) {
  return CLASS_SLOT_TABLE.slot[sc];
}
static_assert(class_slot_size(SIZE_CLASS_COUNT - 1) == SMALL_SLOT_MAX);
// Where the canary of the class's smallest object starts, from its user pointer (the
// largest object's is at class_slot_size(sc) - AOBJECT_META_SIZE).
constexpr int64_t class_tail_min(int sc) {
  return sc == 0 ? 1 : class_slot_size(sc - 1) - AOBJECT_META_SIZE + 1;
}

// A slab is 16 KiB (2 blocks: 127 slabs fill a chunk exactly) up to 1 KiB slots. Above,
// it is the fewest whole 8 KiB blocks that hold at least 8 slots (1 above 8 KiB slots)
// and leave at most an eighth unused: a thread cycling 8 buffers of a class then stays
// on one slab, where 6 slots cost it four slow-path calls a round. Slabs are carved
// lazily, so a thread that needs fewer slots touches no more pages.
inline constexpr int64_t SLAB_UNIT = 8192;  // the block size (ABLOCK_SIZE)
constexpr int64_t slab_size(int sc) {
  const int64_t slot = class_slot_size(sc);
  if (slot <= 1024) return 16 * 1024;
  // The 8-byte offset keeps user pointers 16-byte aligned.
  const int64_t min_slots = slot <= SLAB_UNIT ? 8 : 1;
  int64_t bytes = (min_slots * slot + AOBJECT_HEADER_SIZE + SLAB_UNIT - 1) / SLAB_UNIT * SLAB_UNIT;
  while ((bytes - (bytes - AOBJECT_HEADER_SIZE) / slot * slot) * 8 > bytes) bytes += SLAB_UNIT;
  return bytes;
}
static_assert(slab_size(SIZE_CLASS_COUNT - 1) == 9 * SLAB_UNIT);
// From a table at run time (refills and slab releases).
struct SlabSizeTable {
  int32_t bytes[SIZE_CLASS_COUNT];
  constexpr SlabSizeTable() : bytes() {
    for (int sc = 0; sc < SIZE_CLASS_COUNT; ++sc) bytes[sc] = static_cast<int32_t>(slab_size(sc));
  }
};
inline constexpr SlabSizeTable SLAB_SIZE_TABLE{};
inline int64_t slab_bytes(int sc) {
  return SLAB_SIZE_TABLE.bytes[sc];
}

// Smallest class whose slot holds `size` user bytes plus the meta, computed.
constexpr int size_class_compute(int64_t size) {
  const int64_t slot = size + AOBJECT_META_SIZE;
  if (slot <= 128) return slot <= 32 ? 0 : static_cast<int>((slot - 32 + 15) / 16);
  // Above 128: the power of two below slot-1 picks the group, the quarter the step.
  const int lg = 63 - __builtin_clzll(static_cast<uint64_t>(slot - 1));  // 2^lg < slot
  const int64_t base = int64_t{1} << lg;
  // Shifts, not a division: the step is a power of two, and a 64-bit idiv costs more
  // than the rest of an allocation.
  const int quarter = static_cast<int>((slot - base + (base >> 2) - 1) >> (lg - 2));  // 1..4
  return 7 + (lg - 7) * 4 + quarter - 1;
}

// Every size takes its class from a table (one load instead of a dozen instructions),
// built from size_class_compute, so both always agree. Up to 1 KiB, the bulk of a
// database's objects, by 16-byte step of the size; above, by 128-byte step of the slot,
// exact because from 1 KiB on every class's slot is a multiple of 256.
inline constexpr int64_t SIZE_CLASS_TABLE_MAX = 1024;
inline constexpr int LARGE_SLOT_STEP_SHIFT = 7;
struct SizeClassTable {
  uint8_t by_step[SIZE_CLASS_TABLE_MAX / 16 + 1];
  uint8_t by_slot_step[(SMALL_SLOT_MAX >> LARGE_SLOT_STEP_SHIFT) + 1];
  constexpr SizeClassTable() : by_step(), by_slot_step() {
    for (int i = 0; i <= SIZE_CLASS_TABLE_MAX / 16; ++i) {
      by_step[i] = static_cast<uint8_t>(size_class_compute(int64_t{i} * 16));
    }
    for (int i = 0; i <= (SMALL_SLOT_MAX >> LARGE_SLOT_STEP_SHIFT); ++i) {
      const int64_t slot = int64_t{i} << LARGE_SLOT_STEP_SHIFT;
      by_slot_step[i] = static_cast<uint8_t>(
          size_class_compute(slot > AOBJECT_META_SIZE ? slot - AOBJECT_META_SIZE : 0));
    }
  }
};
inline constexpr SizeClassTable SIZE_CLASS_TABLE{};

// Smallest class whose slot holds `size` user bytes plus the meta; size <= SMALL_OBJECT_MAX.
inline int size_class_of(int64_t size) {
  if (size <= SIZE_CLASS_TABLE_MAX) return SIZE_CLASS_TABLE.by_step[(size + 15) >> 4];
  const int64_t step = (size + AOBJECT_META_SIZE + (1 << LARGE_SLOT_STEP_SHIFT) - 1);
  return SIZE_CLASS_TABLE.by_slot_step[step >> LARGE_SLOT_STEP_SHIFT];
}

}  // namespace achunk
