// Object layer: the 8-byte header before every object and the canary after it, and the
// size classes objects are carved in. The header packs magic, state, origin, label id and
// the requested size into one word written with a single store, so a usage scan can read
// it while the owner thread works. Depends on nothing above the chunk layer.
#pragma once

#include <atomic>
#include <cstdint>
#include <cstring>

namespace achunk {

inline constexpr int64_t AOBJECT_HEADER_SIZE = 8;
inline constexpr int64_t AOBJECT_TAIL_SIZE = 8;
inline constexpr int64_t AOBJECT_META_SIZE = AOBJECT_HEADER_SIZE + AOBJECT_TAIL_SIZE;
inline constexpr uint64_t AOBJECT_TAIL_MAGIC = 0x8F8F7E7E00E7F8F8ULL;
// The largest size a header holds (32 bits). A big object keeps its full size in the
// word before its header instead (ObjectSet::object_size), so it may reach OBJECT_MAX_SIZE.
inline constexpr int64_t AOBJECT_MAX_SIZE = (int64_t{1} << 32) - 1;
inline constexpr int64_t OBJECT_MAX_SIZE = int64_t{1} << 45;  // 32 TiB: leaves room for pads

// Header word layout: [63:48] magic | [47:46] origin | [44] plain | [43:32] label id |
// [31:0] size.
enum class ObjectState : uint16_t {
  FREE = 0xCED0,     // a free slot of a slab
  IN_USE = 0xCED1,   // a small object handed out
  BIG = 0xCED3,      // a big object handed out (a span of its own)
  ALIGNED = 0xCED5,  // an alignment pad: the low 32 bits are the offset back to the object
};

// The call family that allocated an object, kept in the header word in front of its user
// pointer (an aligned pointer's pad too), so a free by another family is caught there.
// Only the drop-in malloc's operators new stamp one; every other object is MALLOC.
enum class AllocOrigin : uint8_t { MALLOC = 0, NEW = 1, NEW_ARRAY = 2 };
inline constexpr int ORIGIN_SHIFT = 46;
inline constexpr uint64_t ORIGIN_MASK = uint64_t{3} << ORIGIN_SHIFT;
inline constexpr uint64_t LABEL_ID_MASK = (uint64_t{1} << 12) - 1;
// Set on an object of the plain class of its header's size (size_class_of): its slot is
// known from the header alone, so malloc_usable_size needs no span lookup. Only malloc's
// front sets it; a header rewritten to another size in the same slot drops it.
inline constexpr uint64_t PLAIN_CLASS_BIT = uint64_t{1} << 44;
constexpr uint64_t origin_bits(AllocOrigin origin) {
  return uint64_t{static_cast<uint8_t>(origin)} << ORIGIN_SHIFT;
}

constexpr uint64_t make_header(ObjectState state, uint16_t label, uint32_t size) {
  return (uint64_t{static_cast<uint16_t>(state)} << 48) |
         ((uint64_t{label} & LABEL_ID_MASK) << 32) | size;
}
// An object in use that `origin` allocated has h >> ORIGIN_SHIFT equal to this: the
// free's state check and origin check are one compare.
constexpr uint64_t in_use_key(AllocOrigin origin) {
  return (make_header(ObjectState::IN_USE, 0, 0) >> ORIGIN_SHIFT) | static_cast<uint8_t>(origin);
}
inline AllocOrigin header_origin(uint64_t h) {
  return static_cast<AllocOrigin>((h & ORIGIN_MASK) >> ORIGIN_SHIFT);
}
// `h` with its size field set to `size`: state, origin and label kept.
constexpr uint64_t with_size(uint64_t h, uint32_t size) {
  return (h & ~uint64_t{0xFFFFFFFF}) | size;
}
// XOR turns an IN_USE header into the FREE one with the same label and size.
inline constexpr uint64_t IN_USE_TO_FREE =
    make_header(ObjectState::IN_USE, 0, 0) ^ make_header(ObjectState::FREE, 0, 0);
inline ObjectState header_state(uint64_t h) {
  return static_cast<ObjectState>(h >> 48);
}
inline uint16_t header_label(uint64_t h) {
  return static_cast<uint16_t>((h >> 32) & LABEL_ID_MASK);
}
inline uint32_t header_size(uint64_t h) {
  return static_cast<uint32_t>(h);
}

// The header word of the object whose user pointer is `ptr`.
inline uint64_t* header_of(void* ptr) {
  return reinterpret_cast<uint64_t*>(static_cast<char*>(ptr) - AOBJECT_HEADER_SIZE);
}
inline uint64_t load_header(void* ptr) {
  return std::atomic_ref<uint64_t>(*header_of(ptr)).load(std::memory_order_relaxed);
}
inline void store_header(void* ptr, uint64_t h) {
  std::atomic_ref<uint64_t>(*header_of(ptr)).store(h, std::memory_order_relaxed);
}

// The header's size field for `size`: saturated for a big object of 4 GiB or more.
constexpr uint32_t header_size_field(int64_t size) {
  return size > AOBJECT_MAX_SIZE ? static_cast<uint32_t>(AOBJECT_MAX_SIZE)
                                 : static_cast<uint32_t>(size);
}

inline void write_tail(void* ptr, int64_t size) {
  std::memcpy(static_cast<char*>(ptr) + size, &AOBJECT_TAIL_MAGIC, sizeof(AOBJECT_TAIL_MAGIC));
}
inline bool tail_intact(const void* ptr, int64_t size) {
  uint64_t tail;
  std::memcpy(&tail, static_cast<const char*>(ptr) + size, sizeof(tail));
  return tail == AOBJECT_TAIL_MAGIC;
}

}  // namespace achunk
