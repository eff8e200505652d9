#include "alloc/object/label.h"

#include <atomic>
#include <cstring>
#include <mutex>

#include "achunk/base/spin_lock.h"
#include "alloc/object/thread_state.h"

namespace achunk {

namespace label_detail {
char names[LABEL_CAPACITY][LABEL_MAX_LEN + 1];
}  // namespace label_detail

namespace {

constexpr int TABLE_SLOTS = 2 * LABEL_CAPACITY;  // open addressing at most half full

struct LabelTable {
  std::atomic<int> count{0};
  char (&names)[LABEL_CAPACITY][LABEL_MAX_LEN + 1] = label_detail::names;
  // Slot -> id + 1 (0 = empty); published with release after the name is written.
  std::atomic<uint16_t> slots[TABLE_SLOTS] = {};
};

ACHUNK_STATIC_SPIN_LOCK(g_labels_lock, ForkRole::HELD);
LabelTable g_labels;

uint32_t hash_label(const char* s, size_t len) {
  uint32_t h = 2166136261u;
  for (size_t i = 0; i < len; ++i) h = (h ^ static_cast<unsigned char>(s[i])) * 16777619u;
  return h;
}

size_t clipped_len(const char* s) {
  size_t n = 0;
  while (n < LABEL_MAX_LEN && s[n] != '\0') ++n;
  return n;
}

bool same(uint16_t id, const char* s, size_t len) {
  const char* name = g_labels.names[id];
  return std::strncmp(name, s, len) == 0 && name[len] == '\0';
}

uint16_t intern(const char* s, size_t len);

uint16_t lookup(const char* s, size_t len) {
  const uint32_t h = hash_label(s, len);
  for (uint32_t probe = 0; probe < TABLE_SLOTS; ++probe) {
    const uint16_t v = g_labels.slots[(h + probe) % TABLE_SLOTS].load(std::memory_order_acquire);
    if (v == 0) return intern(s, len);
    if (same(static_cast<uint16_t>(v - 1), s, len)) return static_cast<uint16_t>(v - 1);
  }
  return intern(s, len);
}

uint16_t intern(const char* s, size_t len) {
  std::lock_guard<SpinLock> guard(g_labels_lock);
  const uint32_t h = hash_label(s, len);
  for (uint32_t probe = 0; probe < TABLE_SLOTS; ++probe) {
    std::atomic<uint16_t>& slot = g_labels.slots[(h + probe) % TABLE_SLOTS];
    const uint16_t v = slot.load(std::memory_order_relaxed);
    if (v != 0) {
      if (same(static_cast<uint16_t>(v - 1), s, len)) return static_cast<uint16_t>(v - 1);
      continue;
    }
    const int id = g_labels.count.load(std::memory_order_relaxed);
    if (id >= LABEL_CAPACITY - 1) break;
    std::memcpy(g_labels.names[id], s, len);
    g_labels.names[id][len] = '\0';
    g_labels.count.store(id + 1, std::memory_order_relaxed);
    slot.store(static_cast<uint16_t>(id + 1), std::memory_order_release);
    return static_cast<uint16_t>(id);
  }
  // Full: everything new is accounted under one overflow label (the last id).
  char* overflow = g_labels.names[LABEL_CAPACITY - 1];
  if (overflow[0] == '\0') std::memcpy(overflow, "label_overflow", 15);
  return LABEL_CAPACITY - 1;
}

}  // namespace

void label_visit_fork_locks(ForkLockVisitor& v) {
  v.visit(g_labels_lock, "label.table");
}

uint16_t label_id(const char* label) {
  if (label == nullptr || label[0] == '\0') label = "unlabeled";
  return lookup(label, clipped_len(label));
}

uint16_t label_id_cached(const char* label) {
  // A real pointer for "no label": an empty entry (ptr nullptr) must never match.
  static constexpr char UNLABELED[] = "unlabeled";
  if (label == nullptr) label = UNLABELED;
  // Lookups in the thread's state; entries written only once the thread owns one.
  LabelCacheEntry& e = thread_state().label_cache[(reinterpret_cast<uintptr_t>(label) >> 4) &
                                                  (ThreadState::LABEL_CACHE_ENTRIES - 1)];
  uint64_t bytes[2];
  const bool readable = read_label_bytes(label, bytes);
  if (e.ptr == label && readable && e.bytes[0] == bytes[0] && e.bytes[1] == bytes[1]) {
    return e.id;
  }
  const uint16_t id = label_id(label);
  // Labels near a page end are interned every time rather than cached.
  if (readable && thread_state_owned()) e = LabelCacheEntry{label, {bytes[0], bytes[1]}, id};
  return id;
}

}  // namespace achunk
