// The per-thread front of ob_malloc: an entry is used only while the label text, the
// allocator and the thread's heap it names are still the same, and the label read
// never faults, even for a label that ends right before an unreadable page.
#include "alloc/object/malloc_front.h"

#include <gtest/gtest.h>
#include <sys/mman.h>

#include <cstdlib>
#include <cstring>
#include <memory>
#include <new>
#include <thread>
#include <vector>

#include "alloc/object/label.h"
#include "alloc/object/malloc_allocator.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

constexpr uint64_t TENANT = 1002;

class MallocFrontTest : public ChunkMgrTest {
 protected:
  int64_t count_of(ObMallocAllocator& a, const char* label) {
    LabelUsage out[64];
    LabelUsage total;
    ObjectSet& set = a.get_tenant_ctx_allocator(TENANT, DEFAULT_CTX_ID)->object_set();
    const int n = set.scan_usage(out, 64, &total);
    for (int i = 0; i < n; ++i) {
      if (out[i].label == label_id(label)) return out[i].count;
    }
    return 0;
  }
};

TEST_F(MallocFrontTest, LabelTextRewrittenAtTheSamePointerIsChargedToTheNewText) {
  ObMallocAllocator a(mgr_);
  char label[32] = "front_first";
  void* p = a.alloc(48, ObMemAttr(TENANT, label));
  void* q = a.alloc(48, ObMemAttr(TENANT, label));  // served by the front entry
  std::strcpy(label, "front_second");
  void* r = a.alloc(48, ObMemAttr(TENANT, label));
  EXPECT_EQ(count_of(a, "front_first"), 2);
  EXPECT_EQ(count_of(a, "front_second"), 1);
  for (void* x : {p, q, r}) ObMallocAllocator::free(x);
  a.flush_thread_caches();
}

TEST_F(MallocFrontTest, AnAllocatorBuiltWhereAnotherDiedIsNotServedFromItsEntries) {
  alignas(ObMallocAllocator) static unsigned char storage[sizeof(ObMallocAllocator)];
  const ObMemAttr attr(TENANT, "front_reborn");
  auto* first = new (storage) ObMallocAllocator(mgr_);
  ObMallocAllocator::free(first->alloc(64, attr));  // leaves an entry naming its heap
  first->~ObMallocAllocator();  // its sets, heaps included, go back to the chunk layer
  EXPECT_EQ(mgr_.get_used(), 0);

  auto* second = new (storage) ObMallocAllocator(mgr_);
  void* p = second->alloc(64, attr);
  ASSERT_NE(p, nullptr);
  ObTenantCtxAllocator* ta = second->get_tenant_ctx_allocator(TENANT, DEFAULT_CTX_ID);
  EXPECT_EQ(ObjectSet::owner_of(p), &ta->object_set());
  EXPECT_GT(ta->hold(), 0);
  ObMallocAllocator::free(p);
  second->flush_thread_caches();
  EXPECT_EQ(ta->hold(), 0);
  second->~ObMallocAllocator();
}

TEST_F(MallocFrontTest, AHeapGivenBackIsNotUsedAgain) {
  ObMallocAllocator a(mgr_);
  const ObMemAttr attr(TENANT, "front_flush");
  void* p = a.alloc(100, attr);
  ObjectSet& set = a.get_tenant_ctx_allocator(TENANT, DEFAULT_CTX_ID)->object_set();
  ThreadHeap* before = set.existing_heap();
  a.flush_thread_caches();  // the heap is abandoned and its block freed
  EXPECT_EQ(set.existing_heap(), nullptr);
  void* q = a.alloc(100, attr);
  ASSERT_NE(q, nullptr);
  EXPECT_NE(set.existing_heap(), nullptr);
  EXPECT_EQ(count_of(a, "front_flush"), 2);
  (void)before;
  ObMallocAllocator::free(p);
  ObMallocAllocator::free(q);
  a.flush_thread_caches();
  EXPECT_EQ(mgr_.get_used(), 0);
}

// alloc_static's entry of its own: filled by the first allocation, it serves only the attr
// and the allocator it was filled for, and never a heap given back.
// The label texts 16-byte aligned: a literal may land in the last 16 bytes of a page, where
// a label is interned each time and no entry is filled (the build's paths move it).
alignas(16) constexpr char STATIC_A_LABEL[] = "static_a";
alignas(16) constexpr char STATIC_B_LABEL[] = "static_b";
const ObMemAttr STATIC_A(TENANT, STATIC_A_LABEL);
const ObMemAttr STATIC_B(TENANT, STATIC_B_LABEL);

TEST_F(MallocFrontTest, TheStaticEntryServesOnlyItsAttrAllocatorAndHeap) {
  ObMallocAllocator a(mgr_);
  void* p = a.alloc_static(100, STATIC_A);
  EXPECT_EQ(malloc_front::static_entry().label, reinterpret_cast<const char*>(&STATIC_A));
  void* q = a.alloc_static(100, STATIC_A);  // served by the entry
  void* r = a.alloc_static(100, STATIC_B);  // another attr: refilled for it
  EXPECT_EQ(malloc_front::static_entry().label, reinterpret_cast<const char*>(&STATIC_B));
  EXPECT_EQ(count_of(a, "static_a"), 2);
  EXPECT_EQ(count_of(a, "static_b"), 1);
  a.flush_thread_caches();  // the heap the entry names is gone
  void* s = a.alloc_static(100, STATIC_B);
  ASSERT_NE(s, nullptr);
  EXPECT_EQ(count_of(a, "static_b"), 2);
  {
    // Same attr, another allocator: not served from a's heap. On the heap: two allocators
    // of 4 MiB each do not fit one thread's stack.
    auto other = std::make_unique<ObMallocAllocator>(mgr_);
    void* t = other->alloc_static(100, STATIC_B);
    ObTenantCtxAllocator* ta = other->get_tenant_ctx_allocator(TENANT, DEFAULT_CTX_ID);
    EXPECT_EQ(ObjectSet::owner_of(t), &ta->object_set());
    ObMallocAllocator::free(t);
    other->flush_thread_caches();
  }
  for (void* x : {p, q, r, s}) ObMallocAllocator::free(x);
  a.flush_thread_caches();
  EXPECT_EQ(mgr_.get_used(), 0);
}

// The drop-in free hands another thread's object to the heap the static entry names. A
// flush gives that heap back: a free before the thread's next malloc must not stash the
// object in it, where nothing would ever give it back (nor in a heap a later thread gets).
TEST_F(MallocFrontTest, AFlushedHeapTakesNoLaterFreeOfAnotherThreadsObject) {
  ObMallocAllocator a(mgr_);
  const ObMemAttr& attr = STATIC_A;
  ObMallocAllocator::free(a.alloc_static(100, attr));  // the static entry names the heap
  void* foreign = nullptr;
  std::thread([&] {
    foreign = a.alloc_static(100, attr);
    a.flush_thread_caches();
  }).join();
  a.flush_thread_caches();
  ObMallocAllocator::free(foreign);
  a.flush_thread_caches();
  EXPECT_EQ(count_of(a, "static_a"), 0);
  EXPECT_EQ(mgr_.get_used(), 0) << "the object waits in a heap given back";
}

// A thread whose first allocations are aligned (I/O buffers, alignas(64) types) fills the
// static entry with the first, as a malloc would: the next ones take the hit (the inline
// one once their slab has a carved slot; a page class carves one at a time, and the next
// is carved in alloc_align, which reads the entry too).
TEST_F(MallocFrontTest, AnAlignedFirstAllocationFillsTheStaticEntry) {
  ObMallocAllocator a(mgr_);
  for (const int64_t align : {int64_t{64}, int64_t{4096}}) {
    std::thread t([&] {
      ASSERT_NE(malloc_front::static_entry().label, reinterpret_cast<const char*>(&STATIC_A));
      void* p = a.alloc_align_static(align, 150, STATIC_A);
      ASSERT_NE(p, nullptr);
      EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % align, 0u);
      EXPECT_EQ(malloc_front::static_entry().label, reinterpret_cast<const char*>(&STATIC_A))
          << "align " << align;
      void* q = align == 64 ? ObMallocAllocator::alloc_align_static_fast(a.id(), 64, 150, STATIC_A)
                            : a.alloc_align_static(align, 150, STATIC_A);
      EXPECT_NE(q, nullptr) << "align " << align;
      EXPECT_EQ(count_of(a, "static_a"), 2) << "align " << align;
      ObMallocAllocator::free(p);
      if (q != nullptr) ObMallocAllocator::free(q);
      a.flush_thread_caches();
    });
    t.join();
  }
  EXPECT_EQ(mgr_.get_used(), 0);
}

// Alignments above a cache line up to a page take the inline hit in the class alloc_align
// picks (class_for_alignment): a page class, or none when sliding inside a plain object
// takes the smaller slot, and none above a page or past the small objects.
TEST_F(MallocFrontTest, TheStaticEntryServesAlignmentsUpToAPageInTheClassAllocAlignPicks) {
  ObMallocAllocator a(mgr_);
  std::vector<void*> held;
  held.push_back(a.alloc_static(100, STATIC_A));
  for (const int64_t align : {int64_t{128}, int64_t{1024}, int64_t{4096}}) {
    for (const int64_t size : {int64_t{1}, int64_t{100}, int64_t{3000}, int64_t{4096},
                               int64_t{8192}, int64_t{16384}, int64_t{20000}, SMALL_OBJECT_MAX}) {
      const int sc = ObMallocAllocator::class_for_alignment(align, size);
      if (sc < 0) {
        EXPECT_EQ(ObMallocAllocator::alloc_align_static_fast(a.id(), align, size, STATIC_A),
                  nullptr)
            << align << " " << size;
        continue;
      }
      EXPECT_TRUE(is_page_class(sc)) << align << " " << size;
      // The class's current slab, with a slot carved and free again (a page class carves
      // a slot at a time, so a first hit would find none).
      void* first = a.alloc_align_static(align, size, STATIC_A);
      ASSERT_NE(first, nullptr) << align << " " << size;
      ObMallocAllocator::free(first);
      void* q = ObMallocAllocator::alloc_align_static_fast(a.id(), align, size, STATIC_A);
      ASSERT_NE(q, nullptr) << align << " " << size;
      EXPECT_EQ(reinterpret_cast<uintptr_t>(q) % align, 0u) << align << " " << size;
      EXPECT_EQ(ObMallocAllocator::get_size(q), size);
      EXPECT_EQ(class_slot_size(slab_of(BlockSet::ptr2block(header_of(q)))->sc_),
                class_slot_size(sc));
      held.push_back(q);
    }
  }
  EXPECT_EQ(ObMallocAllocator::alloc_align_static_fast(a.id(), 8192, 100, STATIC_A), nullptr);
  EXPECT_EQ(
      ObMallocAllocator::alloc_align_static_fast(a.id(), 4096, SMALL_OBJECT_MAX + 1, STATIC_A),
      nullptr);
  // An alignment of 2^63 is none the hit serves, nor is a size of 2^64 - 1.
  EXPECT_EQ(ObMallocAllocator::alloc_align_static_fast(a.id(), uint64_t{1} << 63, 100, STATIC_A),
            nullptr);
  EXPECT_EQ(ObMallocAllocator::alloc_align_static_fast(a.id(), 64, UINT64_MAX, STATIC_A), nullptr);
  EXPECT_EQ(count_of(a, "static_a"), static_cast<int64_t>(held.size()));
  for (void* p : held) ObMallocAllocator::free(p);
  a.flush_thread_caches();
  EXPECT_EQ(mgr_.get_used(), 0);
}

// An allocation aligned to a cache line takes the static entry too, in an aligned class,
// across slab refills, and only for the attr and heap the entry was filled for.
TEST_F(MallocFrontTest, TheStaticEntryServesCacheLineAlignedAllocationsOfItsAttr) {
  ObMallocAllocator a(mgr_);
  std::vector<void*> held;
  held.push_back(a.alloc_static(100, STATIC_A));
  // 300 objects of a 192-byte slot: more than one 16 KiB slab.
  for (int i = 0; i < 300; ++i) {
    void* p = a.alloc_align(64, 150, STATIC_A);
    ASSERT_NE(p, nullptr);
    ASSERT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << i;
    ASSERT_EQ(ObMallocAllocator::get_size(p), 150);
    held.push_back(p);
  }
  EXPECT_EQ(count_of(a, "static_a"), 301);
  held.push_back(a.alloc_align(64, 150, STATIC_B));  // another attr: not A's entry
  EXPECT_EQ(count_of(a, "static_b"), 1);
  a.flush_thread_caches();  // the heap the entry names is gone
  void* p = a.alloc_align(32, 40, STATIC_A);
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 32, 0u);
  EXPECT_EQ(count_of(a, "static_a"), 302);
  held.push_back(p);
  for (void* x : held) ObMallocAllocator::free(x);
  a.flush_thread_caches();
  EXPECT_EQ(mgr_.get_used(), 0);
}

TEST_F(MallocFrontTest, ALabelEndingBeforeAnUnreadablePageIsReadSafely) {
  constexpr size_t PAGE = 4096;
  void* mem = nullptr;
  ASSERT_EQ(posix_memalign(&mem, PAGE, 2 * PAGE), 0);
  char* page = static_cast<char*>(mem);
  char* label = page + PAGE - 5;  // "edge" and its NUL end at the page end
  std::memcpy(label, "edge", 5);
  ASSERT_EQ(mprotect(page + PAGE, PAGE, PROT_NONE), 0);
  uint64_t bytes[2];
  EXPECT_FALSE(read_label_bytes(label, bytes));
  EXPECT_TRUE(read_label_bytes(page, bytes));
  {
    ObMallocAllocator a(mgr_);
    void* p = a.alloc(32, ObMemAttr(TENANT, label));
    void* q = a.alloc(32, ObMemAttr(TENANT, label));
    EXPECT_EQ(count_of(a, "edge"), 2);
    ObMallocAllocator::free(p);
    ObMallocAllocator::free(q);
    a.flush_thread_caches();
  }
  ASSERT_EQ(mprotect(page + PAGE, PAGE, PROT_READ | PROT_WRITE), 0);
  std::free(mem);
}

}  // namespace
}  // namespace achunk::testing
