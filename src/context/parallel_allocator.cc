#include "context/parallel_allocator.h"

#include <atomic>
#include <new>

#include "achunk/base/tls.h"

namespace achunk {

namespace {

// A thread's first way is round-robin in the order threads first allocate from any
// parallel context; after that, the last way it found free.
std::atomic<uint32_t> g_next_thread_index{0};
ACHUNK_TLS int tl_way_hint = -1;

}  // namespace

ObParallelAllocator::ObParallelAllocator(BlockSource& source, int64_t page_size, bool thread_safe,
                                         int parallel, ForkRole role)
    : source_(source), first_(source, page_size, thread_safe, role) {
  const int want = !thread_safe || parallel <= 1 ? 1 : parallel > MAX_WAYS ? MAX_WAYS : parallel;
  if (want == 1) return;
  extra_block_ = source.alloc_block(static_cast<int64_t>(sizeof(ObAllocator)) * (want - 1));
  if (extra_block_ == nullptr) return;  // one way still works, with one lock
  auto* storage = static_cast<ObAllocator*>(block_data(extra_block_));
  for (int i = 0; i < want - 1; ++i)
    extra_[i] = new (storage + i) ObAllocator(source, page_size, true, role);
  ways_ = want;
}

ObParallelAllocator::~ObParallelAllocator() {
  for (int i = 0; i < ways_ - 1; ++i) extra_[i]->~ObAllocator();  // gives their pages back
  if (extra_block_ != nullptr) source_.free_block(extra_block_);
}

void* ObParallelAllocator::alloc_spread(int64_t size, uint16_t label) {
  if (tl_way_hint < 0) {
    tl_way_hint =
        static_cast<int>(g_next_thread_index.fetch_add(1, std::memory_order_relaxed) & 0xFFFF);
  }
  const int first = tl_way_hint % ways_;
  for (int k = 0; k < ways_; ++k) {
    const int w = (first + k) % ways_;
    bool busy = false;
    void* p = way(w).alloc_if_uncontended(size, label, &busy);
    if (!busy) {
      if (k != 0) tl_way_hint = w;  // stay where there was room
      return p;
    }
  }
  return way(first).alloc(size, label);  // every way busy: wait for this thread's
}

bool ObParallelAllocator::free_spread(void* ptr) {
  ObAllocator* owner = ptr != nullptr ? ObAllocator::owner_of(ptr) : nullptr;
  for (int i = 0; i < ways_ && owner != nullptr; ++i) {
    if (owner == &way(i)) return owner->free(ptr);
  }
  return first_.free(ptr);  // not ours: the first way reports it
}

int64_t ObParallelAllocator::hold() const {
  int64_t sum = 0;
  for (int i = 0; i < ways_; ++i) sum += way(i).hold();
  return sum;
}

int64_t ObParallelAllocator::used() const {
  int64_t sum = 0;
  for (int i = 0; i < ways_; ++i) sum += way(i).used();
  return sum;
}

int64_t ObParallelAllocator::live_count() const {
  int64_t sum = 0;
  for (int i = 0; i < ways_; ++i) sum += way(i).live_count();
  return sum;
}

int ObParallelAllocator::single_label() const {
  int label = -2;  // none seen yet
  for (int i = 0; i < ways_; ++i) {
    const int l = way(i).single_label();
    if (l == -1) return -1;
    if (l < 0) continue;  // this way allocated nothing
    if (label >= 0 && label != l) return -1;
    label = l;
  }
  return label;
}

int ObParallelAllocator::scan_usage(LabelUsage* out, int cap, LabelUsage* total) {
  if (ways_ == 1) return first_.scan_usage(out, cap, total);
  int n = 0;
  *total = LabelUsage{};
  for (int w = 0; w < ways_; ++w) {
    LabelUsage part[64];
    LabelUsage part_total;
    const int found = way(w).scan_usage(part, 64, &part_total);
    total->hold += part_total.hold;
    total->used += part_total.used;
    total->count += part_total.count;
    total->blocks += part_total.blocks;
    for (int i = 0; i < found; ++i) {
      int j = 0;
      while (j < n && out[j].label != part[i].label) ++j;
      if (j == n) {
        if (n == cap) continue;  // more labels than room: the total still counts them
        out[n++] = LabelUsage{part[i].label, 0, 0, 0, 0};
      }
      out[j].hold += part[i].hold;
      out[j].used += part[i].used;
      out[j].count += part[i].count;
      out[j].blocks += part[i].blocks;
    }
  }
  return n;
}

}  // namespace achunk
