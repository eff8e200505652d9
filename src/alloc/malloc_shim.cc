// Drop-in malloc, the engine: the glibc malloc family over ob_malloc, exported as
// achunk_* (libachunk_malloc.so also exports them under glibc's names). Every
// allocation is charged to the server tenant's GLIBC ctx under the label
// "glibc_malloc". Never calls malloc. Depends on the object layer and src/global/.
#include <errno.h>
#include <unistd.h>

#include <cstring>

#include "achunk/achunk.h"
#include "achunk/achunk.hpp"
#include "alloc/malloc_allocator.h"
#include "alloc/ob_malloc.h"
#include "global/global.h"

namespace achunk {
namespace {

constexpr ObMemAttr GLIBC_ATTR(OB_SERVER_TENANT_ID, "glibc_malloc", GLIBC);
constexpr size_t MAX_ALIGN = size_t{1} << 20;
constexpr size_t PAGE = 4096;

bool too_big(size_t size) {
  return size > static_cast<size_t>(AOBJECT_MAX_SIZE);
}

void* fail_enomem() {
  errno = ENOMEM;
  return nullptr;
}

void* aligned(size_t alignment, size_t size) {
  if (too_big(size)) return fail_enomem();
  void* p = global_malloc_allocator().alloc_align(static_cast<int64_t>(alignment),
                                                  static_cast<int64_t>(size), GLIBC_ATTR);
  return p != nullptr ? p : fail_enomem();
}

bool valid_alignment(size_t a) {
  return a != 0 && (a & (a - 1)) == 0 && a <= MAX_ALIGN;
}

}  // namespace
}  // namespace achunk

using achunk::GLIBC_ATTR;

extern "C" {

void* achunk_malloc(size_t size) {
  if (achunk::too_big(size)) return achunk::fail_enomem();
  void* p = achunk::global_malloc_allocator().alloc(static_cast<int64_t>(size), GLIBC_ATTR);
  return p != nullptr ? p : achunk::fail_enomem();
}

void achunk_free(void* ptr) {
  achunk::ObMallocAllocator::free(ptr);
}

void* achunk_calloc(size_t count, size_t size) {
  size_t total = 0;
  if (__builtin_mul_overflow(count, size, &total)) return achunk::fail_enomem();
  void* p = achunk_malloc(total);
  // A big object carved from untouched pages is zero already: writing zeros would only
  // fault in pages a sparse table (InnoDB's hash tables are calloc'ed) may never use.
  if (p == nullptr) return nullptr;
  if (total <= static_cast<size_t>(achunk::SMALL_OBJECT_MAX) || !achunk::ObjectSet::born_zero(p)) {
    std::memset(p, 0, total);
  }
  return p;
}

void* achunk_realloc(void* ptr, size_t size) {
  if (ptr == nullptr) return achunk_malloc(size);
  if (size == 0) {  // glibc: frees and returns NULL
    achunk_free(ptr);
    return nullptr;
  }
  if (achunk::too_big(size)) return achunk::fail_enomem();
  void* p = achunk::global_malloc_allocator().realloc(ptr, static_cast<int64_t>(size), GLIBC_ATTR);
  return p != nullptr ? p : achunk::fail_enomem();
}

void* achunk_reallocarray(void* ptr, size_t count, size_t size) {
  size_t total = 0;
  if (__builtin_mul_overflow(count, size, &total)) return achunk::fail_enomem();
  return achunk_realloc(ptr, total);
}

void* achunk_memalign(size_t alignment, size_t size) {
  // glibc rounds a non-power-of-two alignment up rather than failing.
  size_t a = alignment < 16 ? 16 : alignment;
  if ((a & (a - 1)) != 0) a = size_t{1} << (64 - __builtin_clzll(a));
  if (a > achunk::MAX_ALIGN) {
    errno = EINVAL;
    return nullptr;
  }
  return achunk::aligned(a, size);
}

int achunk_posix_memalign(void** out, size_t alignment, size_t size) {
  if (!achunk::valid_alignment(alignment) || alignment % sizeof(void*) != 0) return EINVAL;
  void* p = achunk::aligned(alignment, size);
  if (p == nullptr) return ENOMEM;
  *out = p;
  return 0;
}

void* achunk_aligned_alloc(size_t alignment, size_t size) {
  if (!achunk::valid_alignment(alignment)) {
    errno = EINVAL;
    return nullptr;
  }
  return achunk::aligned(alignment, size);
}

void* achunk_valloc(size_t size) {
  return achunk::aligned(achunk::PAGE, size);
}

void* achunk_pvalloc(size_t size) {
  size_t rounded = 0;
  if (__builtin_add_overflow(size, achunk::PAGE - 1, &rounded)) return achunk::fail_enomem();
  rounded &= ~(achunk::PAGE - 1);
  return achunk::aligned(achunk::PAGE, rounded == 0 ? achunk::PAGE : rounded);
}

size_t achunk_malloc_usable_size(void* ptr) {
  if (ptr == nullptr) return 0;
  const int64_t n = achunk::ObMallocAllocator::usable_size(ptr);
  return n < 0 ? 0 : static_cast<size_t>(n);
}

void achunk_free_sized(void* ptr, size_t) {
  achunk_free(ptr);
}
void achunk_free_aligned_sized(void* ptr, size_t, size_t) {
  achunk_free(ptr);
}

int achunk_set_option(const char* name, const char* value, char* err, size_t err_len) {
  return achunk::set_option(name, value, err, static_cast<int64_t>(err_len)) ? 0 : -1;
}

int achunk_get_option(const char* name, int64_t* value) {
  return achunk::get_option(name, value) ? 0 : -1;
}

int64_t achunk_print_chunk_dump(char* buf, size_t len, int json) {
  return achunk::print_chunk_dump(buf, static_cast<int64_t>(len),
                                  json != 0 ? achunk::DumpFormat::JSON : achunk::DumpFormat::TEXT);
}

int64_t achunk_print_usage(char* buf, size_t len, int json) {
  return achunk::ob_print_usage(buf, static_cast<int64_t>(len), json != 0);
}

int64_t achunk_release_free_memory(void) {
  return achunk::release_free_memory();
}

}  // extern "C"
