#include "achunk/chunk/chunk_registry.h"

namespace achunk::chunk_registry {

uint8_t unit_state[UNITS];

namespace {

uint64_t unit_of(const void* p) {
  return reinterpret_cast<uintptr_t>(p) >> UNIT_SHIFT;
}

}  // namespace

bool covers(const void* chunk) {
  return unit_of(chunk) < UNITS;
}

bool was_released(const void* p) {
  const uint64_t unit = unit_of(p);
  return unit < UNITS && load_state(unit) == RELEASED;
}

void add(const void* chunk) {
  std::atomic_ref<uint8_t>(unit_state[unit_of(chunk)]).store(LIVE, std::memory_order_release);
}

void remove(const void* chunk) {
  std::atomic_ref<uint8_t>(unit_state[unit_of(chunk)]).store(RELEASED, std::memory_order_release);
}

void mark(const void* chunk) {
  const uint64_t unit = unit_of(chunk);
  if (unit >= UNITS || load_state(unit) != LIVE) return;
  std::atomic_ref<uint8_t>(unit_state[unit]).store(LIVE_MARKED, std::memory_order_release);
}

bool is_marked(const void* chunk) {
  const uint64_t unit = unit_of(chunk);
  return unit < UNITS && load_state(unit) == LIVE_MARKED;
}

}  // namespace achunk::chunk_registry
