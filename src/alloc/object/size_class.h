// Object layer: the size classes small objects are carved in. A slot holds the 8-byte
// header, the user bytes and the 8-byte tail canary, and is a multiple of 16 so every
// user pointer is 16-byte aligned. Plain classes step by 16 bytes up to 128 and by a
// quarter of the power of two above (at most 25% internal waste); aligned classes repeat
// the plain slots that are multiples of 64 in slabs laid out for 64-byte-aligned user
// pointers, page classes those that are multiples of 4096 for page-aligned ones.
// Depends on aobject.h.
#pragma once

#include <cstdint>

#include "alloc/object/aobject.h"

namespace achunk {

inline constexpr int64_t SMALL_SLOT_MAX = 65536;
inline constexpr int64_t SMALL_OBJECT_MAX = SMALL_SLOT_MAX - AOBJECT_META_SIZE;

// Plain classes, which size_class_of picks: 32..128 by 16 (7 classes), then 4 per
// doubling up to 65536 (36 classes).
inline constexpr int PLAIN_CLASS_COUNT = 7 + 4 * 9;

constexpr int64_t class_slot_formula(int sc) {
  if (sc < 7) return 32 + 16 * sc;
  const int k = sc - 7;  // 0 -> 160
  const int64_t base = int64_t{128} << (k / 4);
  return base + (base / 4) * (k % 4 + 1);
}

// Aligned classes, for allocations aligned to 32 or 64 (alignas(64) types): the plain
// slots that are multiples of 64 (64, 128, 192, and every one from 256 up), in slabs
// whose slot 0 starts SLAB_ALIGN bytes in, so every user pointer is 64-byte aligned. A
// plain slab keeps its first slot 16 bytes in: an object's header then shares the cache
// line of its first bytes, which a 64-byte-aligned object's cannot.
// Page classes, for allocations aligned to a page (direct I/O buffers, valloc): the plain
// slots that are multiples of 4096, slot 0 a page in, so every user pointer is page
// aligned. An object's header ends the page before it and shares that page with the
// canary of the slot before.
inline constexpr int64_t SLAB_ALIGN = 64;
inline constexpr int64_t PAGE_ALIGN = 4096;
constexpr int count_plain_slots_aligned_to(int64_t align) {
  int n = 0;
  for (int sc = 0; sc < PLAIN_CLASS_COUNT; ++sc) n += class_slot_formula(sc) % align == 0;
  return n;
}
// The k-th plain slot that is a multiple of `align`.
constexpr int64_t plain_slot_aligned_to(int64_t align, int k) {
  for (int p = 0; p < PLAIN_CLASS_COUNT; ++p) {
    if (class_slot_formula(p) % align != 0) continue;
    if (k-- == 0) return class_slot_formula(p);
  }
  return 0;
}
inline constexpr int ALIGNED_CLASS_BASE = PLAIN_CLASS_COUNT;
inline constexpr int PAGE_CLASS_BASE =
    ALIGNED_CLASS_BASE + count_plain_slots_aligned_to(SLAB_ALIGN);
inline constexpr int SIZE_CLASS_COUNT = PAGE_CLASS_BASE + count_plain_slots_aligned_to(PAGE_ALIGN);
constexpr int64_t any_class_slot_formula(int sc) {
  if (sc < PLAIN_CLASS_COUNT) return class_slot_formula(sc);
  if (sc < PAGE_CLASS_BASE) return plain_slot_aligned_to(SLAB_ALIGN, sc - ALIGNED_CLASS_BASE);
  return plain_slot_aligned_to(PAGE_ALIGN, sc - PAGE_CLASS_BASE);
}
// An aligned or a page class: user pointers aligned to 64 at least.
constexpr bool is_aligned_class(int sc) {
  return sc >= ALIGNED_CLASS_BASE;
}
constexpr bool is_page_class(int sc) {
  return sc >= PAGE_CLASS_BASE;
}
// Bytes before slot 0 in a slab of class sc: its user pointer is 16 bytes in, 64 or 4096.
constexpr int64_t slab_lead(int sc) {
  const int64_t user = is_page_class(sc)      ? PAGE_ALIGN
                       : is_aligned_class(sc) ? SLAB_ALIGN
                                              : 2 * AOBJECT_HEADER_SIZE;
  return user - AOBJECT_HEADER_SIZE;
}
// From a table: the allocation paths look a slot size up for every object they carve,
// and another thread's free the canary's first possible byte.
struct ClassSlotTable {
  int32_t slot[SIZE_CLASS_COUNT];
  // Where the canary of the class's smallest object starts, from its user pointer: one
  // byte past the largest object of the class below (none below the first plain or
  // aligned class).
  int32_t tail_min[SIZE_CLASS_COUNT];
  constexpr ClassSlotTable() : slot(), tail_min() {
    for (int sc = 0; sc < SIZE_CLASS_COUNT; ++sc) {
      slot[sc] = static_cast<int32_t>(any_class_slot_formula(sc));
      tail_min[sc] =
          sc == 0 || sc == ALIGNED_CLASS_BASE || sc == PAGE_CLASS_BASE
              ? 1
              : static_cast<int32_t>(any_class_slot_formula(sc - 1) - AOBJECT_META_SIZE + 1);
    }
  }
};
inline constexpr ClassSlotTable CLASS_SLOT_TABLE{};
constexpr int64_t class_slot_size(int sc) {
  return CLASS_SLOT_TABLE.slot[sc];
}
static_assert(class_slot_size(PLAIN_CLASS_COUNT - 1) == SMALL_SLOT_MAX);
static_assert(class_slot_size(SIZE_CLASS_COUNT - 1) == SMALL_SLOT_MAX);
// Where the canary of the class's smallest object starts, from its user pointer (the
// largest object's is at class_slot_size(sc) - AOBJECT_META_SIZE).
constexpr int64_t class_tail_min(int sc) {
  return CLASS_SLOT_TABLE.tail_min[sc];
}
static_assert(class_tail_min(0) == 1 && class_tail_min(ALIGNED_CLASS_BASE) == 1 &&
              class_tail_min(PAGE_CLASS_BASE) == 1);
static_assert(class_tail_min(1) == class_slot_size(0) - AOBJECT_META_SIZE + 1);

// A slab is 16 KiB (2 blocks: 127 slabs fill a chunk exactly) up to 1 KiB slots. Above,
// it is the fewest whole 8 KiB blocks that hold at least 8 slots (1 above 8 KiB slots)
// and leave at most an eighth unused: a thread cycling 8 buffers of a class then stays
// on one slab, where 6 slots cost it four slow-path calls a round. Slabs are carved
// lazily, so a thread that needs fewer slots touches no more pages.
inline constexpr int64_t SLAB_UNIT = 8192;  // the block size (ABLOCK_SIZE)
constexpr int64_t slab_size(int sc) {
  const int64_t slot = class_slot_size(sc);
  if (slot <= 1024) return 16 * 1024;
  const int64_t lead = slab_lead(sc);
  const int64_t min_slots = slot <= SLAB_UNIT ? 8 : 1;
  int64_t bytes = (min_slots * slot + lead + SLAB_UNIT - 1) / SLAB_UNIT * SLAB_UNIT;
  while ((bytes - (bytes - lead) / slot * slot) * 8 > bytes) bytes += SLAB_UNIT;
  return bytes;
}
static_assert(slab_size(PLAIN_CLASS_COUNT - 1) == 9 * SLAB_UNIT);
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

// The aligned (or page) class that holds `size` (<= SMALL_OBJECT_MAX): the smallest whose
// slot is at least the plain class's.
struct AlignedOfPlainTable {
  uint8_t sc[PLAIN_CLASS_COUNT];
  constexpr AlignedOfPlainTable(int base, int end) : sc() {
    for (int p = 0; p < PLAIN_CLASS_COUNT; ++p) {
      int a = base;
      while (a + 1 < end && any_class_slot_formula(a) < class_slot_formula(p)) ++a;
      sc[p] = static_cast<uint8_t>(a);
    }
  }
};
inline constexpr AlignedOfPlainTable ALIGNED_OF_PLAIN{ALIGNED_CLASS_BASE, PAGE_CLASS_BASE};
inline constexpr AlignedOfPlainTable PAGE_OF_PLAIN{PAGE_CLASS_BASE, SIZE_CLASS_COUNT};
inline int aligned_size_class(int64_t size) {
  return ALIGNED_OF_PLAIN.sc[size_class_of(size)];
}
inline int page_size_class(int64_t size) {
  return PAGE_OF_PLAIN.sc[size_class_of(size)];
}
static_assert(any_class_slot_formula(PAGE_CLASS_BASE) == PAGE_ALIGN);
static_assert(any_class_slot_formula(SIZE_CLASS_COUNT - 1) == SMALL_SLOT_MAX);

}  // namespace achunk
