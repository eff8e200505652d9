// Drop-in malloc, the symbols: compiled only into libachunk_malloc.so, it defines
// glibc's malloc family, the __libc_* aliases and every C++ operator new/delete on top of
// the achunk_* functions, so `LD_PRELOAD=libachunk_malloc.so` or
// `mysqld_safe --malloc-lib=/usr/lib/x86_64-linux-gnu/libachunk_malloc.so` routes a
// whole process through achunk. Depends on achunk.h, global.h (fork handlers) and the
// object layer's origins (object_check.h).
#include <dlfcn.h>
#include <errno.h>
#include <unistd.h>

#include <cstddef>
#include <cstdlib>
#include <new>

#include "achunk/achunk.h"
#include "achunk/base/error_report.h"
#include "alloc/object/object_check.h"
#include "alloc/object/object_set.h"
#include "global/global.h"
#include "global/malloc_hit.h"

#define ACHUNK_EXPORT extern "C" __attribute__((visibility("default")))

// The drop-in defaults: the housekeeping thread and the stats region are on (see
// global.cc, which looks for this symbol).
namespace achunk {
extern const bool drop_in_malloc_linked = true;
}

// The library links no libstdc++ (so a process that is not C++, and every exec, loads
// none): operator new's new_handler and bad_alloc come from the program's libstdc++,
// bound weakly at load. Only C++ calls operator new, and a C++ program has it loaded.
namespace {
using NewHandler = void (*)();
extern "C" NewHandler stdcxx_get_new_handler() noexcept __asm__("_ZSt15get_new_handlerv")
    __attribute__((weak));
extern "C" [[noreturn]] void stdcxx_throw_bad_alloc() __asm__("_ZSt17__throw_bad_allocv")
    __attribute__((weak));

// libstdc++'s own nothrow operators new: each calls the throwing one (this library's) and
// catches what the new_handler throws, which the standard has nothrow new turn into
// nullptr. Looked up at load (RTLD_NEXT: the definitions this library interposes).
enum NothrowKind { NEW, NEW_ARRAY, NEW_ALIGNED, NEW_ARRAY_ALIGNED, NOTHROW_KINDS };
void* g_stdcxx_nothrow_new[NOTHROW_KINDS];

void resolve_libstdcxx_nothrow_new() {
  static const char* const NAMES[NOTHROW_KINDS] = {"_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t",
                                                   "_ZnwmSt11align_val_tRKSt9nothrow_t",
                                                   "_ZnamSt11align_val_tRKSt9nothrow_t"};
  if (stdcxx_get_new_handler == nullptr) return;  // no libstdc++ in this process
  for (int k = 0; k < NOTHROW_KINDS; ++k) g_stdcxx_nothrow_new[k] = dlsym(RTLD_NEXT, NAMES[k]);
}

// What operator new (new[]) stamps on its objects (origin_bits) and what operator delete
// (delete[]) expects (in_use_key): each family's own, so a free by another family is
// caught at the free; MALLOC's when the process's operators are not all this library's.
// Written once, at load; a load each on new and delete, folded into the or and the compare.
struct OriginKeys {
  uint64_t bits;
  uint64_t key;
};
OriginKeys g_new_origin = {achunk::origin_bits(achunk::AllocOrigin::NEW),
                           achunk::in_use_key(achunk::AllocOrigin::NEW)};
OriginKeys g_array_origin = {achunk::origin_bits(achunk::AllocOrigin::NEW_ARRAY),
                             achunk::in_use_key(achunk::AllocOrigin::NEW_ARRAY)};

// A program (or a library before this one) that defines some operators new or delete of
// its own pairs them with this library's others: its new (over malloc) meets this
// delete, or this new meets its delete (over free). Origins would then report what is
// no mismatch, so every object is MALLOC's in such a process.
void check_operators_are_ours() {
  static const char* const NAMES[] = {"_Znwm",
                                      "_Znam",
                                      "_ZnwmRKSt9nothrow_t",
                                      "_ZnamRKSt9nothrow_t",
                                      "_ZnwmSt11align_val_t",
                                      "_ZnamSt11align_val_t",
                                      "_ZnwmSt11align_val_tRKSt9nothrow_t",
                                      "_ZnamSt11align_val_tRKSt9nothrow_t",
                                      "_ZdlPv",
                                      "_ZdaPv",
                                      "_ZdlPvRKSt9nothrow_t",
                                      "_ZdaPvRKSt9nothrow_t",
                                      "_ZdlPvm",
                                      "_ZdaPvm",
                                      "_ZdlPvSt11align_val_t",
                                      "_ZdaPvSt11align_val_t",
                                      "_ZdlPvmSt11align_val_t",
                                      "_ZdaPvmSt11align_val_t",
                                      "_ZdlPvSt11align_val_tRKSt9nothrow_t",
                                      "_ZdaPvSt11align_val_tRKSt9nothrow_t"};
  if (stdcxx_get_new_handler == nullptr) return;  // not C++: only these operators exist
  Dl_info self;
  if (dladdr(static_cast<void*>(&g_new_origin), &self) == 0) return;
  for (const char* name : NAMES) {
    void* f = dlsym(RTLD_DEFAULT, name);
    Dl_info where;
    if (f == nullptr || (dladdr(f, &where) != 0 && where.dli_fbase == self.dli_fbase)) continue;
    g_new_origin = {0, achunk::in_use_key(achunk::AllocOrigin::MALLOC)};
    g_array_origin = g_new_origin;
    achunk::global_detail::origins_foreign.store(true, std::memory_order_relaxed);
    achunk::set_report_dealloc_mismatch(false);
    return;
  }
}
}  // namespace

// At load time, outside any malloc call: pthread_atfork may itself allocate. The
// housekeeping thread starts later, on the first allocation.
__attribute__((constructor)) static void achunk_malloc_init() {
  achunk::install_fork_handlers();
  resolve_libstdcxx_nothrow_new();
  check_operators_are_ours();
}

// At exit, with stats_print:true: the dump and the usage go to stderr.
__attribute__((destructor)) static void achunk_malloc_fini() {
  int64_t on = 0;
  if (achunk_get_option("stats_print", &on) != 0 || on == 0) return;
  static char buf[64 * 1024];
  for (int what = 0; what < 2; ++what) {
    const int64_t n = what == 0 ? achunk_print_chunk_dump(buf, sizeof(buf), 0)
                                : achunk_print_usage(buf, sizeof(buf), 0);
    const size_t len =
        n < static_cast<int64_t>(sizeof(buf)) ? static_cast<size_t>(n) : sizeof(buf) - 1;
    for (size_t off = 0; off < len;) {
      const ssize_t w = ::write(2, buf + off, len - off);
      if (w <= 0) break;
      off += static_cast<size_t>(w);
    }
  }
}

// The hit inline here too: a jump into achunk_malloc would be one more taken branch.
ACHUNK_EXPORT void* malloc(size_t n) {
  if (void* p = achunk::malloc_hit(n)) return p;
  return achunk::malloc_miss(n);
}
ACHUNK_EXPORT void free(void* p) {
  achunk_free(p);
}
ACHUNK_EXPORT void* calloc(size_t c, size_t n) {
  return achunk_calloc(c, n);
}
ACHUNK_EXPORT void* realloc(void* p, size_t n) {
  return achunk_realloc(p, n);
}
ACHUNK_EXPORT void* reallocarray(void* p, size_t c, size_t n) {
  return achunk_reallocarray(p, c, n);
}
ACHUNK_EXPORT void* memalign(size_t a, size_t n) {
  return achunk_memalign(a, n);
}
ACHUNK_EXPORT int posix_memalign(void** out, size_t a, size_t n) {
  return achunk_posix_memalign(out, a, n);
}
ACHUNK_EXPORT void* aligned_alloc(size_t a, size_t n) {
  return achunk_aligned_alloc(a, n);
}
ACHUNK_EXPORT void* valloc(size_t n) {
  return achunk_valloc(n);
}
ACHUNK_EXPORT void* pvalloc(size_t n) {
  return achunk_pvalloc(n);
}
ACHUNK_EXPORT size_t malloc_usable_size(void* p) {
  return achunk_malloc_usable_size(p);
}
ACHUNK_EXPORT void free_sized(void* p, size_t n) {
  achunk_free_sized(p, n);
}
ACHUNK_EXPORT void free_aligned_sized(void* p, size_t a, size_t n) {
  achunk_free_aligned_sized(p, a, n);
}
// glibc's extras. <malloc.h> is not included (its declarations of malloc and friends
// carry exception specifications these definitions do not), so the structs are spelled
// here with glibc's layouts.
struct GlibcMallinfo {
  int arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
static int clip_int(size_t v) {
  return v > 0x7fffffff ? 0x7fffffff : static_cast<int>(v);
}
ACHUNK_EXPORT struct achunk_mallinfo mallinfo2() {
  return achunk_mallinfo2();
}
ACHUNK_EXPORT GlibcMallinfo mallinfo() {
  const struct achunk_mallinfo m = achunk_mallinfo2();
  return GlibcMallinfo{clip_int(m.arena),   clip_int(m.ordblks),  clip_int(m.smblks),
                       clip_int(m.hblks),   clip_int(m.hblkhd),   clip_int(m.usmblks),
                       clip_int(m.fsmblks), clip_int(m.uordblks), clip_int(m.fordblks),
                       clip_int(m.keepcost)};
}
ACHUNK_EXPORT int malloc_trim(size_t pad) {
  return achunk_malloc_trim(pad);
}
ACHUNK_EXPORT void malloc_stats() {
  achunk_malloc_stats();
}
ACHUNK_EXPORT int malloc_info(int options, void* fp) {
  return achunk_malloc_info(options, fp);
}
ACHUNK_EXPORT int mallopt(int param, int value) {
  return achunk_mallopt(param, value);
}
ACHUNK_EXPORT void cfree(void* p) {
  achunk_free(p);
}

// glibc's internal names, which some programs and libraries call directly: aliases of
// the definitions above, not more wrappers.
#define ACHUNK_ALIAS(name, target) \
  extern "C"                       \
      __attribute__((visibility("default"), alias(#target), copy(target))) decltype(target) name
ACHUNK_ALIAS(__libc_malloc, malloc);
ACHUNK_ALIAS(__libc_free, free);
ACHUNK_ALIAS(__libc_calloc, calloc);
ACHUNK_ALIAS(__libc_realloc, realloc);
ACHUNK_ALIAS(__libc_memalign, memalign);
ACHUNK_ALIAS(__libc_valloc, valloc);
ACHUNK_ALIAS(__libc_pvalloc, pvalloc);
ACHUNK_ALIAS(__posix_memalign, posix_memalign);
ACHUNK_ALIAS(__libc_free_sized, free_sized);
ACHUNK_ALIAS(__libc_free_aligned_sized, free_aligned_sized);

namespace {

// operator new's allocation, marked with its family's `origin` bits.
void* alloc_aligned(size_t n, size_t align, uint64_t origin) {
  void* p = align <= 16 ? achunk_malloc(n) : achunk_aligned_alloc(align, n);
  return achunk::MallocShim::stamp_origin(p, origin);
}

NewHandler current_new_handler() {
  return stdcxx_get_new_handler != nullptr ? stdcxx_get_new_handler() : nullptr;
}

// operator new: retry through the new_handler, then throw, as the standard says.
__attribute__((noinline)) void* new_or_throw(size_t n, size_t align, uint64_t origin) {
  for (;;) {
    void* p = alloc_aligned(n, align, origin);
    if (p != nullptr) return p;
    NewHandler handler = current_new_handler();
    if (handler == nullptr) {
      if (stdcxx_throw_bad_alloc != nullptr) stdcxx_throw_bad_alloc();
      // libstdc++ came later (dlopen, not in the global scope): nothing to throw with.
      achunk::write_stderr_line(
          "achunk: operator new is out of memory and cannot throw bad_alloc "
          "(libstdc++ was not loaded with the program)");
      abort();
    }
    handler();
  }
}

// nothrow new: nullptr once the new_handler gives up; if it throws, libstdc++'s own
// nothrow new (which calls the throwing one) catches it.
void* new_nothrow(size_t n, size_t align, NothrowKind kind) noexcept {
  const bool array = kind == NEW_ARRAY || kind == NEW_ARRAY_ALIGNED;
  const uint64_t origin = array ? g_array_origin.bits : g_new_origin.bits;
  void* p = alloc_aligned(n, align, origin);
  if (p != nullptr || current_new_handler() == nullptr) return p;
  if (void* next = g_stdcxx_nothrow_new[kind]) {
    static constexpr std::nothrow_t TAG{};  // not std::nothrow, a libstdc++ symbol
    if (kind == NEW || kind == NEW_ARRAY) {
      return reinterpret_cast<void* (*)(size_t, const std::nothrow_t&)>(next)(n, TAG);
    }
    return reinterpret_cast<void* (*)(size_t, std::align_val_t, const std::nothrow_t&)>(next)(
        n, std::align_val_t(align), TAG);
  }
  for (;;) {  // no libstdc++ nothrow new to catch with: a throwing handler's exception escapes
    NewHandler handler = current_new_handler();
    if (handler == nullptr) return nullptr;
    handler();
    p = alloc_aligned(n, align, origin);
    if (p != nullptr) return p;
  }
}

}  // namespace

#define ACHUNK_NEW __attribute__((visibility("default")))

// The hit inline, as malloc's (and posix_memalign's for an over-aligned type): C++
// servers allocate most of their objects here, and without it each new paid a call, a
// frame and the handler loop's set-up.
ACHUNK_NEW void* operator new(size_t n) {
  if (void* p = achunk::malloc_hit(n, g_new_origin.bits)) return p;
  return new_or_throw(n, 0, g_new_origin.bits);
}
ACHUNK_NEW void* operator new[](size_t n) {
  if (void* p = achunk::malloc_hit(n, g_array_origin.bits)) return p;
  return new_or_throw(n, 0, g_array_origin.bits);
}
ACHUNK_NEW void* operator new(size_t n, const std::nothrow_t&) noexcept {
  return new_nothrow(n, 0, NEW);
}
ACHUNK_NEW void* operator new[](size_t n, const std::nothrow_t&) noexcept {
  return new_nothrow(n, 0, NEW_ARRAY);
}
ACHUNK_NEW void* operator new(size_t n, std::align_val_t a) {
  if (void* p = achunk::aligned_hit(static_cast<size_t>(a), n, g_new_origin.bits)) return p;
  return new_or_throw(n, static_cast<size_t>(a), g_new_origin.bits);
}
ACHUNK_NEW void* operator new[](size_t n, std::align_val_t a) {
  if (void* p = achunk::aligned_hit(static_cast<size_t>(a), n, g_array_origin.bits)) return p;
  return new_or_throw(n, static_cast<size_t>(a), g_array_origin.bits);
}
ACHUNK_NEW void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return new_nothrow(n, static_cast<size_t>(a), NEW_ALIGNED);
}
ACHUNK_NEW void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return new_nothrow(n, static_cast<size_t>(a), NEW_ARRAY_ALIGNED);
}
ACHUNK_NEW void operator delete(void* p) noexcept {
  achunk::MallocShim::free<achunk::AllocOrigin::NEW>(p, g_new_origin.key);
}
ACHUNK_NEW void operator delete[](void* p) noexcept {
  achunk::MallocShim::free<achunk::AllocOrigin::NEW_ARRAY>(p, g_array_origin.key);
}
ACHUNK_NEW void operator delete(void* p, const std::nothrow_t&) noexcept {
  achunk::MallocShim::free<achunk::AllocOrigin::NEW>(p, g_new_origin.key);
}
ACHUNK_NEW void operator delete[](void* p, const std::nothrow_t&) noexcept {
  achunk::MallocShim::free<achunk::AllocOrigin::NEW_ARRAY>(p, g_array_origin.key);
}
ACHUNK_NEW void operator delete(void* p, size_t) noexcept {
  achunk::MallocShim::free<achunk::AllocOrigin::NEW>(p, g_new_origin.key);
}
ACHUNK_NEW void operator delete[](void* p, size_t) noexcept {
  achunk::MallocShim::free<achunk::AllocOrigin::NEW_ARRAY>(p, g_array_origin.key);
}
ACHUNK_NEW void operator delete(void* p, std::align_val_t) noexcept {
  achunk::MallocShim::free<achunk::AllocOrigin::NEW>(p, g_new_origin.key);
}
ACHUNK_NEW void operator delete[](void* p, std::align_val_t) noexcept {
  achunk::MallocShim::free<achunk::AllocOrigin::NEW_ARRAY>(p, g_array_origin.key);
}
ACHUNK_NEW void operator delete(void* p, size_t, std::align_val_t) noexcept {
  achunk::MallocShim::free<achunk::AllocOrigin::NEW>(p, g_new_origin.key);
}
ACHUNK_NEW void operator delete[](void* p, size_t, std::align_val_t) noexcept {
  achunk::MallocShim::free<achunk::AllocOrigin::NEW_ARRAY>(p, g_array_origin.key);
}
ACHUNK_NEW void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  achunk::MallocShim::free<achunk::AllocOrigin::NEW>(p, g_new_origin.key);
}
ACHUNK_NEW void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  achunk::MallocShim::free<achunk::AllocOrigin::NEW_ARRAY>(p, g_array_origin.key);
}
