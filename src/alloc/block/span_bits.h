// Block layer, internal: a chunk's span-start bit words (BlockChunkMeta::span_bits_) and
// the set's free-length bits, shared by block_set.cc and block_set_resize.cc. Bit words
// are read without the owner's lock by frees on other threads (ptr2block) while the lock
// holder splits or merges other spans of the same chunk, so every access is a relaxed
// atomic (plain moves on x86); writers hold the lock, so load + store suffices.
// Depends on nothing but the standard library.
#pragma once

#include <atomic>
#include <cstdint>

namespace achunk::span_bits {

inline uint64_t load_word(const uint64_t& w) {
  return std::atomic_ref<uint64_t>(const_cast<uint64_t&>(w)).load(std::memory_order_relaxed);
}
inline void store_word(uint64_t& w, uint64_t v) {
  std::atomic_ref<uint64_t>(w).store(v, std::memory_order_relaxed);
}
inline void set_bit(uint64_t* bits, int i) {
  store_word(bits[i >> 6], load_word(bits[i >> 6]) | (uint64_t{1} << (i & 63)));
}
inline void clear_bit(uint64_t* bits, int i) {
  store_word(bits[i >> 6], load_word(bits[i >> 6]) & ~(uint64_t{1} << (i & 63)));
}

// Highest set bit at or below i, or -1.
inline int highest_at_or_below(const uint64_t* bits, int i) {
  for (int w = i >> 6; w >= 0; --w) {
    uint64_t word = load_word(bits[w]);
    if (w == (i >> 6) && (i & 63) != 63) word &= (uint64_t{1} << ((i & 63) + 1)) - 1;
    if (word != 0) return w * 64 + 63 - __builtin_clzll(word);
  }
  return -1;
}

// Lowest set bit at or above i, or -1.
inline int lowest_at_or_above(const uint64_t* bits, int i) {
  for (int w = i >> 6; w < 4; ++w) {
    uint64_t word = load_word(bits[w]);
    if (w == (i >> 6)) word &= ~uint64_t{0} << (i & 63);
    if (word != 0) return w * 64 + __builtin_ctzll(word);
  }
  return -1;
}

}  // namespace achunk::span_bits
