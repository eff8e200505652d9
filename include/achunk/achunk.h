/* achunk's C API: the malloc family under an achunk_ prefix (what libachunk_malloc.so
 * exports as malloc, free, ... when preloaded), option get/set, and the chunk dump and
 * usage print into a caller buffer. For C callers and FFI (LuaJIT).
 * Depends on nothing but the C standard headers. */
#ifndef ACHUNK_ACHUNK_H_
#define ACHUNK_ACHUNK_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* None of the malloc family throws: C++ callers (operator new and delete) then reach it
 * by a tail call, with no unwinding frame. */
#if defined(__GNUC__)
#define ACHUNK_NOTHROW __attribute__((__nothrow__))
#else
#define ACHUNK_NOTHROW
#endif

/* Same contracts as glibc's: NULL with errno ENOMEM on failure, malloc(0) is a unique
 * pointer, realloc(p, 0) frees p and returns NULL, posix_memalign returns EINVAL for an
 * alignment that is not a power-of-two multiple of sizeof(void*), aligned_alloc sets
 * EINVAL for one that is not a power of two, memalign for one above 2^63 (it rounds
 * others up). Sizes up to 32 TiB, any power-of-two alignment up to 1 TiB; above, ENOMEM.
 * free and malloc_usable_size of a pointer achunk did not hand out (static, stack,
 * foreign memory, inside an object, already freed) print one line naming it and abort. */
void* achunk_malloc(size_t size) ACHUNK_NOTHROW;
void achunk_free(void* ptr) ACHUNK_NOTHROW;
void* achunk_calloc(size_t count, size_t size) ACHUNK_NOTHROW;
void* achunk_realloc(void* ptr, size_t size) ACHUNK_NOTHROW;
void* achunk_reallocarray(void* ptr, size_t count, size_t size) ACHUNK_NOTHROW;
void* achunk_memalign(size_t alignment, size_t size) ACHUNK_NOTHROW;
int achunk_posix_memalign(void** out, size_t alignment, size_t size) ACHUNK_NOTHROW;
void* achunk_aligned_alloc(size_t alignment, size_t size) ACHUNK_NOTHROW;
void* achunk_valloc(size_t size) ACHUNK_NOTHROW;
void* achunk_pvalloc(size_t size) ACHUNK_NOTHROW;
size_t achunk_malloc_usable_size(void* ptr) ACHUNK_NOTHROW;
void achunk_free_sized(void* ptr, size_t size) ACHUNK_NOTHROW;
void achunk_free_aligned_sized(void* ptr, size_t alignment, size_t size) ACHUNK_NOTHROW;

/* Options by name ("memory_chunk_cache_size", "2M"): 0 on success; -1 with the reason
 * in err (NUL-terminated) for a bad name or value, changing nothing. */
int achunk_set_option(const char* name, const char* value, char* err, size_t err_len);
/* 0 and *value on success, -1 for an unknown name. */
int achunk_get_option(const char* name, int64_t* value);

/* The [chunk_mgr] dump (json != 0: JSON) and the [MEMORY] usage print into buf, always
 * NUL-terminated; return the length needed, like snprintf. Never allocate. */
int64_t achunk_print_chunk_dump(char* buf, size_t len, int json);
int64_t achunk_print_usage(char* buf, size_t len, int json);
/* Unmaps every cached chunk now; returns the bytes released. */
int64_t achunk_release_free_memory(void);

/* glibc's extras over achunk's figures (libachunk_malloc.so exports them under glibc's
 * names; docs/STATS.md maps each field). The struct has mallinfo2's layout. */
struct achunk_mallinfo {
  size_t arena, ordblks, smblks, hblks, hblkhd, usmblks, fsmblks, uordblks, fordblks, keepcost;
};
struct achunk_mallinfo achunk_mallinfo2(void);
/* Unmaps every cached chunk and washes every free span; 1 if that released anything.
 * `pad` is ignored. */
int achunk_malloc_trim(size_t pad);
/* The [chunk_mgr] dump and the usage lines, on stderr. */
void achunk_malloc_stats(void);
/* The same figures as XML (<malloc version="achunk-1">) on `fp`; 0, or -1 with errno
 * EINVAL for options != 0. */
int achunk_malloc_info(int options, void* fp);
/* 1 for M_TRIM_THRESHOLD (-1) and M_MMAP_THRESHOLD (-3), which achunk accepts and
 * ignores; 0 for every other parameter. */
int achunk_mallopt(int param, int value);

#ifdef __cplusplus
}
#endif

#endif /* ACHUNK_ACHUNK_H_ */
