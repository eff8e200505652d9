#include "alloc/malloc/malloc_shim.h"

#include <cstdint>
#include <cstring>

namespace achunk {

namespace {

constexpr size_t PAGE = 4096;

}  // namespace

// A valid alignment achunk cannot serve (above MAX_ALIGN) fails like an allocation.
void* MallocShim::aligned(size_t alignment, size_t size) {
  if (size > static_cast<size_t>(OBJECT_MAX_SIZE) ||
      alignment > static_cast<size_t>(ObMallocAllocator::MAX_ALIGN)) {
    return fail_enomem();
  }
  void* p = allocator_.alloc_align_static(static_cast<int64_t>(alignment),
                                          static_cast<int64_t>(size), GLIBC_ATTR);
  return p != nullptr ? p : fail_enomem();
}

void* MallocShim::calloc(size_t count, size_t size) {
  size_t total = 0;
  if (__builtin_mul_overflow(count, size, &total)) return fail_enomem();
  void* p = malloc(total);
  // A big object carved from untouched pages is zero already: writing zeros would only
  // fault in pages a sparse table (InnoDB's hash tables are calloc'ed) may never use.
  if (p == nullptr) return nullptr;
  if (total <= static_cast<size_t>(SMALL_OBJECT_MAX)) {
    std::memset(p, 0, total);
  } else if (!ObjectSet::born_zero(p)) {
    ObjectSet::zero_big(p, static_cast<int64_t>(total));
  }
  return p;
}

void* MallocShim::realloc(void* ptr, size_t size) {
  if (ptr == nullptr) return malloc(size);
  if (size == 0) {  // glibc: frees and returns NULL
    free(ptr);
    return nullptr;
  }
  if (size > static_cast<size_t>(OBJECT_MAX_SIZE)) return fail_enomem();
  void* p = allocator_.realloc(ptr, static_cast<int64_t>(size), GLIBC_ATTR);
  return p != nullptr ? p : fail_enomem();
}

void* MallocShim::reallocarray(void* ptr, size_t count, size_t size) {
  size_t total = 0;
  if (__builtin_mul_overflow(count, size, &total)) return fail_enomem();
  return realloc(ptr, total);
}

void* MallocShim::memalign(size_t alignment, size_t size) {
  // glibc refuses what no power of two covers, and rounds any other non-power-of-two
  // alignment up rather than failing.
  if (alignment > SIZE_MAX / 2 + 1) {
    errno = EINVAL;
    return nullptr;
  }
  size_t a = alignment < 16 ? 16 : alignment;
  if (!power_of_two(a)) a = size_t{1} << (64 - __builtin_clzll(a));
  return aligned(a, size);
}

int MallocShim::posix_memalign(void** out, size_t alignment, size_t size) {
  if (!posix_alignment(alignment)) return EINVAL;
  void* p = aligned(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

void* MallocShim::aligned_alloc(size_t alignment, size_t size) {
  if (!power_of_two(alignment)) {  // C17 and glibc 2.38: EINVAL
    errno = EINVAL;
    return nullptr;
  }
  return aligned(alignment, size);
}

void* MallocShim::valloc(size_t size) {
  return aligned(PAGE, size);
}

void* MallocShim::pvalloc(size_t size) {
  size_t rounded = 0;
  if (__builtin_add_overflow(size, PAGE - 1, &rounded)) return fail_enomem();
  rounded &= ~(PAGE - 1);
  return aligned(PAGE, rounded == 0 ? PAGE : rounded);
}

}  // namespace achunk
