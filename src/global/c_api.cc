// The C API (include/achunk/achunk.h) over the process-wide objects: the malloc family
// as achunk_* (libachunk_malloc.so also exports them under glibc's names), options and
// the dumps. Each function hands the wired allocator to the drop-in malloc layer.
#include "achunk/achunk.h"

#include "achunk/achunk.hpp"
#include "alloc/malloc/malloc_shim.h"
#include "global/global.h"
#include "global/ob_malloc.h"

namespace {

achunk::MallocShim shim() {
  return achunk::MallocShim(achunk::global_malloc_allocator());
}

}  // namespace

extern "C" {

void* achunk_malloc(size_t size) {
  return shim().malloc(size);
}
void achunk_free(void* ptr) {
  achunk::MallocShim::free(ptr);
}
void* achunk_calloc(size_t count, size_t size) {
  return shim().calloc(count, size);
}
void* achunk_realloc(void* ptr, size_t size) {
  return shim().realloc(ptr, size);
}
void* achunk_reallocarray(void* ptr, size_t count, size_t size) {
  return shim().reallocarray(ptr, count, size);
}
void* achunk_memalign(size_t alignment, size_t size) {
  return shim().memalign(alignment, size);
}
int achunk_posix_memalign(void** out, size_t alignment, size_t size) {
  return shim().posix_memalign(out, alignment, size);
}
void* achunk_aligned_alloc(size_t alignment, size_t size) {
  return shim().aligned_alloc(alignment, size);
}
void* achunk_valloc(size_t size) {
  return shim().valloc(size);
}
void* achunk_pvalloc(size_t size) {
  return shim().pvalloc(size);
}
size_t achunk_malloc_usable_size(void* ptr) {
  return achunk::MallocShim::usable_size(ptr);
}
void achunk_free_sized(void* ptr, size_t) {
  achunk::MallocShim::free(ptr);
}
void achunk_free_aligned_sized(void* ptr, size_t, size_t) {
  achunk::MallocShim::free(ptr);
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
