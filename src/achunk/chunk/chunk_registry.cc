#include "achunk/chunk/chunk_registry.h"

namespace achunk::chunk_registry {

constinit std::atomic<uint64_t> live_bits[WORDS] = {};
constinit std::atomic<uint64_t> released_bits[WORDS] = {};

namespace {

uint64_t unit_of(const void* p) {
  return reinterpret_cast<uintptr_t>(p) >> UNIT_SHIFT;
}

bool test(const std::atomic<uint64_t>* bits, uint64_t unit) {
  return ((bits[unit / 64].load(std::memory_order_relaxed) >> (unit % 64)) & 1) != 0;
}

}  // namespace

bool covers(const void* chunk) {
  return unit_of(chunk) < UNITS;
}

bool was_released(const void* p) {
  const uint64_t unit = unit_of(p);
  return unit < UNITS && test(released_bits, unit);
}

void add(const void* chunk) {
  const uint64_t unit = unit_of(chunk);
  const uint64_t bit = uint64_t{1} << (unit % 64);
  // Reading first skips a locked write when there is nothing to clear.
  if (test(released_bits, unit))
    released_bits[unit / 64].fetch_and(~bit, std::memory_order_relaxed);
  live_bits[unit / 64].fetch_or(bit, std::memory_order_release);
}

void remove(const void* chunk) {
  const uint64_t unit = unit_of(chunk);
  const uint64_t bit = uint64_t{1} << (unit % 64);
  live_bits[unit / 64].fetch_and(~bit, std::memory_order_release);
  released_bits[unit / 64].fetch_or(bit, std::memory_order_relaxed);
}

}  // namespace achunk::chunk_registry
