// Drop-in malloc layer: glibc's malloc contracts (errno, overflow checks, alignment
// rules, realloc(p, 0), calloc zeroing) over one ObMallocAllocator. Every allocation is
// charged to the server tenant's GLIBC ctx under the label "glibc_malloc". The wiring on
// top hands the process-wide allocator in (src/global/c_api.cc exports these as
// achunk_*). Never calls malloc. Depends on the object layer.
#pragma once

#include <errno.h>

#include <cstddef>

#include "alloc/object/malloc_allocator.h"

namespace achunk {

inline constexpr ObMemAttr GLIBC_ATTR(OB_SERVER_TENANT_ID, "glibc_malloc", GLIBC);

class MallocShim {
 public:
  explicit MallocShim(ObMallocAllocator& allocator) : allocator_(allocator) {}

  // The drop-in malloc's hit, inline: a small object from the calling thread's entry of
  // the allocator whose id() is `allocator_id`, with no call. nullptr when it is not a
  // hit; malloc() then serves the request.
  // `origin`: origin_bits of the caller's family (operator new's), 0 for malloc's.
  __attribute__((always_inline)) static void* malloc_fast(uint32_t allocator_id, size_t size,
                                                          uint64_t origin = 0) {
    return ObMallocAllocator::alloc_static_fast(allocator_id, static_cast<int64_t>(size),
                                                GLIBC_ATTR, origin);
  }
  void* malloc(size_t size) {
    if (void* p = malloc_fast(allocator_.id(), size)) return p;
    return malloc_miss(size);
  }
  // malloc() once malloc_fast() returned nullptr: no second try of the hit.
  void* malloc_miss(size_t size) {
    if (size > static_cast<size_t>(OBJECT_MAX_SIZE)) return fail_enomem();
    void* p = allocator_.alloc_static_miss(static_cast<int64_t>(size), GLIBC_ATTR);
    return p != nullptr ? p : fail_enomem();
  }
  // The aligned calls' hit, inline as malloc_fast: `alignment` a power of two.
  __attribute__((always_inline)) static void* aligned_fast(uint32_t allocator_id, size_t alignment,
                                                           size_t size, uint64_t origin = 0) {
    return ObMallocAllocator::alloc_align_static_fast(allocator_id, alignment, size, GLIBC_ATTR,
                                                      origin);
  }
  // posix_memalign's rule: a power of two and a multiple of sizeof(void*).
  static bool posix_alignment(size_t alignment) {
    return power_of_two(alignment) && alignment % sizeof(void*) == 0;
  }
  static bool power_of_two(size_t x) { return x != 0 && (x & (x - 1)) == 0; }
  // free(), or operator delete (delete[]) with `origin` NEW (NEW_ARRAY): `key` as
  // ObMallocAllocator::free's.
  template <AllocOrigin origin = AllocOrigin::MALLOC>
  static void free(void* ptr, uint64_t key = in_use_key(origin)) {
    ObMallocAllocator::free<origin>(ptr, key);
  }
  // Marks what a miss of operator new returned as `origin`'s (nullptr left alone).
  static void* stamp_origin(void* ptr, uint64_t origin) {
    if (ptr != nullptr && origin != 0) store_header(ptr, load_header(ptr) | origin);
    return ptr;
  }
  void* calloc(size_t count, size_t size);
  void* realloc(void* ptr, size_t size);
  // realloc's hit and its move, as ObMallocAllocator's (resize_in_slot, realloc_moved),
  // with errno set on failure.
  __attribute__((always_inline)) static bool resize_in_slot(void* ptr, size_t size, int* sc,
                                                            uint64_t* header) {
    return ObMallocAllocator::resize_in_slot(ptr, static_cast<int64_t>(size), sc, header);
  }
  void* realloc_moved(void* ptr, size_t size, int sc, uint64_t header) {
    void* p = allocator_.realloc_moved(ptr, static_cast<int64_t>(size), sc, header, GLIBC_ATTR);
    return p != nullptr ? p : fail_enomem();
  }
  void* reallocarray(void* ptr, size_t count, size_t size);
  void* memalign(size_t alignment, size_t size);
  int posix_memalign(void** out, size_t alignment, size_t size);
  void* aligned_alloc(size_t alignment, size_t size);
  void* valloc(size_t size);
  void* pvalloc(size_t size);
  static size_t usable_size(void* ptr) {
    if (ptr == nullptr) return 0;
    const int64_t n = ObMallocAllocator::usable_size_fast(ptr);
    return n < 0 ? 0 : static_cast<size_t>(n);
  }

 private:
  static void* fail_enomem() {
    errno = ENOMEM;
    return nullptr;
  }
  void* aligned(size_t alignment, size_t size);

  ObMallocAllocator& allocator_;
};

}  // namespace achunk
