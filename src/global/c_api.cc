// The C API (include/achunk/achunk.h) over the process-wide objects: the malloc family
// as achunk_* (libachunk_malloc.so also exports them under glibc's names), options and
// the dumps. Each function hands the wired allocator to the drop-in malloc layer.
#include "achunk/achunk.h"

#include <errno.h>
#include <stdio.h>
#include <unistd.h>

#include <cstring>
#include <mutex>

#include "achunk/achunk.hpp"
#include "achunk/base/buf_writer.h"
#include "achunk/base/spin_lock.h"
#include "alloc/malloc/malloc_shim.h"
#include "global/global.h"
#include "global/malloc_hit.h"
#include "global/ob_malloc.h"

namespace {

achunk::MallocShim shim() {
  return achunk::MallocShim(achunk::global_malloc_allocator());
}

// malloc_stats and malloc_info print through one static buffer: writing to a FILE may
// allocate, and 64 KiB is too much for a small thread's stack.
ACHUNK_STATIC_SPIN_LOCK(g_report_lock, achunk::ForkRole::HELD);
char g_report[1 << 16];

void write_all(int fd, const char* p, int64_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, p, static_cast<size_t>(n));
    if (w <= 0 && errno != EINTR) return;
    if (w > 0) {
      p += w;
      n -= w;
    }
  }
}

// realloc of an object, out of line: achunk_realloc's malloc then needs no frame.
__attribute__((noinline)) void* realloc_of(void* ptr, size_t size) {
  return shim().realloc(ptr, size);
}
__attribute__((noinline)) void* realloc_moved_of(void* ptr, size_t size, int sc, uint64_t header) {
  return shim().realloc_moved(ptr, size, sc, header);
}

int64_t clipped(int64_t needed) {
  return needed < static_cast<int64_t>(sizeof(g_report)) ? needed : sizeof(g_report) - 1;
}

}  // namespace

namespace achunk {
void c_api_visit_fork_locks(ForkLockVisitor& v) {
  v.visit(g_report_lock, "c_api.report");
}
__attribute__((noinline)) void* malloc_miss(size_t size) {
  return shim().malloc_miss(size);
}
}  // namespace achunk

extern "C" {

void* achunk_malloc(size_t size) {
  // The hit reads neither the allocator nor its pointer; the rest is a tail call.
  if (void* p = achunk::malloc_hit(size)) return p;
  return achunk::malloc_miss(size);
}
void achunk_free(void* ptr) {
  achunk::MallocShim::free(ptr);
}
void* achunk_calloc(size_t count, size_t size) {
  // A small calloc is malloc's hit and a memset (the hit serves small sizes only).
  size_t total = 0;
  if (!__builtin_mul_overflow(count, size, &total)) {
    if (void* p = achunk::malloc_hit(total)) return std::memset(p, 0, total);
  }
  return shim().calloc(count, size);
}
void* achunk_realloc(void* ptr, size_t size) {
  // realloc(NULL, n), how C code starts a buffer it grows, is a malloc.
  if (ptr == nullptr) {
    if (void* p = achunk::malloc_hit(size)) return p;
    return achunk::malloc_miss(size);
  }
  // A slab's object resized within its slot, inline as malloc's hit; one that must move
  // keeps what the hit found.
  int sc = -1;
  uint64_t header = 0;
  if (achunk::MallocShim::resize_in_slot(ptr, size, &sc, &header)) return ptr;
  if (sc >= 0) return realloc_moved_of(ptr, size, sc, header);
  return realloc_of(ptr, size);
}
void* achunk_reallocarray(void* ptr, size_t count, size_t size) {
  return shim().reallocarray(ptr, count, size);
}
void* achunk_memalign(size_t alignment, size_t size) {
  // Up to a page, the hit as posix_memalign's.
  if (void* p = achunk::aligned_hit(alignment, size)) return p;
  return shim().memalign(alignment, size);
}
int achunk_posix_memalign(void** out, size_t alignment, size_t size) {
  // The hit as malloc's: alignas(64) types are allocated as often as plain ones.
  if (achunk::MallocShim::posix_alignment(alignment)) {
    if (void* p = achunk::aligned_hit(alignment, size)) {
      *out = p;
      return 0;
    }
  }
  return shim().posix_memalign(out, alignment, size);
}
void* achunk_aligned_alloc(size_t alignment, size_t size) {
  // operator new of an over-aligned type (libstdc++) comes here.
  if (void* p = achunk::aligned_hit(alignment, size)) return p;
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

struct achunk_mallinfo achunk_mallinfo2(void) {
  const achunk::ChunkMgrStats st = achunk::global_chunk_mgr().get_stats(false);
  struct achunk_mallinfo mi = {};
  mi.arena = static_cast<size_t>(st.hold);
  mi.hblks = static_cast<size_t>(achunk::global_chunk_mgr().live_huge_chunks());
  mi.uordblks = static_cast<size_t>(st.used);
  mi.fordblks = static_cast<size_t>(st.freelists_hold);
  mi.keepcost = static_cast<size_t>(st.freelists_hold);
  return mi;
}

int achunk_malloc_trim(size_t) {
  achunk::global_malloc_allocator().unstash_thread_caches();
  const int64_t unmapped = achunk::release_free_memory();
  const int64_t washed = achunk::global_malloc_allocator().wash_stale_spans(0);
  return unmapped > 0 || washed > 0 ? 1 : 0;
}

void achunk_malloc_stats(void) {
  std::lock_guard<achunk::SpinLock> guard(g_report_lock);
  write_all(2, g_report, clipped(achunk::print_chunk_dump(g_report, sizeof(g_report))));
  write_all(2, g_report, clipped(achunk::ob_print_usage(g_report, sizeof(g_report))));
}

int achunk_malloc_info(int options, void* fp) {
  if (options != 0 || fp == nullptr) {
    errno = EINVAL;
    return -1;
  }
  const struct achunk_mallinfo mi = achunk_mallinfo2();
  std::lock_guard<achunk::SpinLock> guard(g_report_lock);
  achunk::BufWriter w(g_report, sizeof(g_report));
  w.str("<malloc version=\"achunk-1\">\n");
  w.str("<total type=\"arena\" size=\"").num(static_cast<int64_t>(mi.arena)).str("\"/>\n");
  w.str("<total type=\"used\" size=\"").num(static_cast<int64_t>(mi.uordblks)).str("\"/>\n");
  w.str("<total type=\"cached\" size=\"").num(static_cast<int64_t>(mi.fordblks)).str("\"/>\n");
  w.str("<total type=\"mmap\" count=\"").num(static_cast<int64_t>(mi.hblks));
  w.str("\" size=\"").num(static_cast<int64_t>(mi.hblkhd)).str("\"/>\n");
  w.str("<system type=\"current\" size=\"").num(static_cast<int64_t>(mi.arena)).str("\"/>\n");
  w.str("</malloc>\n");
  // After the figures are in the buffer: fwrite may allocate, which never takes this lock.
  const int64_t n = clipped(w.length());
  return fwrite(g_report, 1, static_cast<size_t>(n), static_cast<FILE*>(fp)) ==
                 static_cast<size_t>(n)
             ? 0
             : -1;
}

int achunk_mallopt(int param, int) {
  constexpr int M_TRIM_THRESHOLD_ = -1;
  constexpr int M_MMAP_THRESHOLD_ = -3;
  return param == M_TRIM_THRESHOLD_ || param == M_MMAP_THRESHOLD_ ? 1 : 0;
}

}  // extern "C"
