#include "tools/man/achunk_page.h"

#include <iterator>
#include <type_traits>

#include "achunk/achunk.h"
#include "achunk/achunk.hpp"
#include "achunk/base/options.h"
#include "tools/man/roff.h"

namespace achunk::man {

namespace {

struct ApiLine {
  const char* prototype;
  const char* what;
};

// The prototype as the page prints it, accepted only if the header declares the function
// with exactly that type: a changed or removed function fails the build, not the reader.
template <bool DECLARED>
constexpr const char* declared(const char* prototype) {
  static_assert(DECLARED, "achunk(3) lists a function the public headers do not declare so");
  return prototype;
}
#define ACHUNK_API(ret, name, params, what)                                                \
  ApiLine {                                                                                \
    declared<std::is_same_v<decltype(&name), ret(*) params>>(#ret " " #name #params), what \
  }

constexpr ApiLine C_API[] = {
    ACHUNK_API(void*, achunk_malloc, (size_t size), "As malloc(3)."),
    ACHUNK_API(void, achunk_free, (void* ptr), "As free(3)."),
    ACHUNK_API(void*, achunk_calloc, (size_t count, size_t size), "As calloc(3)."),
    ACHUNK_API(
        void*, achunk_realloc, (void* ptr, size_t size),
        "As realloc(3): realloc(NULL, n) allocates, realloc(p, 0) frees p and returns NULL."),
    ACHUNK_API(void*, achunk_reallocarray, (void* ptr, size_t count, size_t size),
               "As reallocarray(3): ENOMEM when count * size overflows."),
    ACHUNK_API(void*, achunk_memalign, (size_t alignment, size_t size),
               "As memalign(3): rounds an alignment up to a power of two; EINVAL above 2^63."),
    ACHUNK_API(int, achunk_posix_memalign, (void** out, size_t alignment, size_t size),
               "As posix_memalign(3): EINVAL unless alignment is a power-of-two multiple of "
               "sizeof(void*)."),
    ACHUNK_API(void*, achunk_aligned_alloc, (size_t alignment, size_t size),
               "As aligned_alloc(3): EINVAL unless alignment is a power of two."),
    ACHUNK_API(void*, achunk_valloc, (size_t size), "As valloc(3): page-aligned."),
    ACHUNK_API(void*, achunk_pvalloc, (size_t size),
               "As pvalloc(3): page-aligned, the size rounded up to pages."),
    ACHUNK_API(size_t, achunk_malloc_usable_size, (void* ptr),
               "As malloc_usable_size(3): every byte it reports may be written."),
    ACHUNK_API(void, achunk_free_sized, (void* ptr, size_t size), "As C23's free_sized."),
    ACHUNK_API(void, achunk_free_aligned_sized, (void* ptr, size_t alignment, size_t size),
               "As C23's free_aligned_sized."),
    ACHUNK_API(int, achunk_set_option,
               (const char* name, const char* value, char* err, size_t err_len),
               "Sets an option by name from its text (\"memory_chunk_cache_size\", \"2M\") and "
               "applies it at once: 0, or -1 with the reason in err, changing nothing."),
    ACHUNK_API(int, achunk_get_option, (const char* name, int64_t* value),
               "An option's current value (sizes in bytes, booleans 0 or 1): 0, or -1 for an "
               "unknown name."),
    ACHUNK_API(int64_t, achunk_print_chunk_dump, (char* buf, size_t len, int json),
               "The [chunk_mgr] dump (json != 0: JSON) into buf, NUL-terminated; returns the "
               "length needed, like snprintf(3); never allocates."),
    ACHUNK_API(int64_t, achunk_print_usage, (char* buf, size_t len, int json),
               "The [MEMORY] usage print into buf, the same way."),
    ACHUNK_API(int64_t, achunk_release_free_memory, (void),
               "Unmaps every cached chunk now; returns the bytes released."),
    ACHUNK_API(struct achunk_mallinfo, achunk_mallinfo2, (void),
               "As mallinfo2(3), over achunk's figures (struct achunk_mallinfo has its layout)."),
    ACHUNK_API(int, achunk_malloc_trim, (size_t pad),
               "As malloc_trim(3): gives the calling thread's stashed objects back to their "
               "slabs, unmaps every cached chunk and washes every free span; 1 if that "
               "released anything; pad is ignored."),
    ACHUNK_API(void, achunk_malloc_stats, (void),
               "As malloc_stats(3): the [chunk_mgr] dump and the usage lines on stderr."),
    ACHUNK_API(int, achunk_malloc_info, (int options, void* fp),
               "As malloc_info(3): the same figures as XML (<malloc version=\"achunk-1\">) on the "
               "FILE* fp; -1 with EINVAL for options != 0."),
    ACHUNK_API(int, achunk_mallopt, (int param, int value),
               "As mallopt(3): 1 for M_TRIM_THRESHOLD and M_MMAP_THRESHOLD, accepted and ignored; "
               "0 for every other parameter."),
};

constexpr ApiLine CXX_API[] = {
    ACHUNK_API(void*, achunk::chunk_alloc, (int64_t size),
               "A 2~MiB-aligned chunk with room for size payload bytes, or nullptr."),
    ACHUNK_API(void, achunk::chunk_free, (void* payload),
               "Returns a chunk_alloc payload to the chunk cache."),
    ACHUNK_API(bool, achunk::set_option,
               (const char* name, const char* value, char* err, int64_t err_len),
               "The C++ form of achunk_set_option."),
    ACHUNK_API(bool, achunk::get_option, (const char* name, int64_t* value),
               "The C++ form of achunk_get_option."),
    ACHUNK_API(int64_t, achunk::last_failure_message, (char* buf, int64_t len),
               "Why the calling thread's last allocation failed, as one line."),
    ACHUNK_API(int64_t, achunk::release_free_memory, (), "Unmaps every cached chunk now."),
};

#undef ACHUNK_API

constexpr const char* TYPE_NAMES[] = {"size", "boolean", "integer"};

std::string size_text(int64_t v) {
  struct Unit {
    int64_t bytes;
    char suffix;
  };
  constexpr Unit UNITS[] = {
      {int64_t{1} << 40, 'T'}, {1 << 30, 'G'}, {1 << 20, 'M'}, {1 << 10, 'K'}};
  for (const Unit& u : UNITS) {
    if (v != 0 && v % u.bytes == 0) return std::to_string(v / u.bytes) + u.suffix;
  }
  return std::to_string(v);
}

std::string value_text(const OptionDef& d, int64_t v) {
  switch (d.type) {
    case OptionType::BOOL:
      return v != 0 ? "true" : "false";
    case OptionType::SIZE:
      return size_text(v);
    case OptionType::INT:
      break;
  }
  return std::to_string(v);
}

// The table's help as a sentence: capitalised, ending in a full stop.
std::string sentence(const char* help) {
  std::string s(help);
  if (!s.empty() && s[0] >= 'a' && s[0] <= 'z') s[0] = static_cast<char>(s[0] - 'a' + 'A');
  if (!s.empty() && s.back() != '.') s += '.';
  return s;
}

std::string options_section() {
  std::string out = ".SH OPTIONS\n";
  out += roff_text(
             "Set in ACHUNK_CONF, at run time with achunk-dump --set NAME=VALUE PID, or by "
             "achunk_set_option(). Each entry below is rendered from the library's own option "
             "table: its type, range, library default and, where it differs, its default in "
             "libachunk_malloc.so.") +
         "\n";
  for (const OptionDef& d : OPTION_TABLE) {
    std::string tag = bold(d.name) + " (" + TYPE_NAMES[static_cast<int>(d.type)];
    if (d.type != OptionType::BOOL) {
      tag += ", " + roff_text(value_text(d, d.min)) + " to " + roff_text(value_text(d, d.max));
    }
    tag += ")";
    std::string defaults = "Default " + value_text(d, d.def);
    if (d.drop_in_def != INT64_MIN && d.drop_in_def != d.def) {
      defaults += "; in libachunk_malloc.so " + value_text(d, d.drop_in_def);
    }
    out += ".TP\n" + tag + "\n" + roff_text(defaults + ". " + sentence(d.help)) + "\n";
  }
  return out;
}

std::string api_lines(const ApiLine* lines, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) {
    out += ".TP\n" + bold(lines[i].prototype) + "\n" + roff_text(lines[i].what) + "\n";
  }
  return out;
}

std::string tagged(std::string_view tag, std::string_view text) {
  return ".TP\n" + std::string(tag) + "\n" + roff_text(text) + "\n";
}

}  // namespace

std::string achunk_page(const InstallPaths& p) {
  const std::string so = p.libdir + "/libachunk_malloc.so";
  // .nh and .ad l: no hyphenation, ragged right, so option names and paths stay whole.
  std::string out =
      ".TH ACHUNK 3 \"\" \"achunk " + p.version + "\" \"achunk manual\"\n.nh\n.ad l\n";
  out +=
      ".SH NAME\nachunk \\- a memory allocator for database servers; libachunk_malloc.so, "
      "the drop\\-in malloc\n";

  out += ".SH SYNOPSIS\n.nf\n";
  out += bold("LD_PRELOAD=" + so) + " [" + bold("ACHUNK_CONF=") + italic("key:value,...") + "] " +
         italic("program") + "\n";
  out += bold("mysqld_safe --malloc-lib=" + so) + "\n\n";
  out += bold("#include <achunk/achunk.h>") + "      /* C */\n";
  out += bold("#include <achunk/achunk.hpp>") + "    // C++\n\n";
  out += roff_text(
             "cc ... -lachunk    (pkg-config --cflags --libs achunk; CMake: "
             "find_package(achunk), target achunk::achunk)") +
         "\n.fi\n";

  out += ".SH DESCRIPTION\n";
  out += roff_text(
             "achunk is a memory allocator for database servers, built around the chunk cache "
             "of OceanBase's allocator. Objects are carved from 2~MiB-aligned chunks. A freed "
             "chunk is kept in a cache, so the next allocation needs no mmap(2) and no page "
             "faults; a chunk idle in the cache for chunk_cache_ttl_ms (30~s) is unmapped, and "
             "a free span inside a chunk idle for span_idle_ms (1~s) gives its pages back. A "
             "busy server keeps the speed of a large cache; a quiet one shrinks to the memory of "
             "a small one.") +
         "\n.PP\n";
  out += roff_text(
             "libachunk_malloc.so is the drop-in malloc. Preloaded into a process, it serves the "
             "malloc family (malloc, free, calloc, realloc, reallocarray, memalign, "
             "posix_memalign, aligned_alloc, valloc, pvalloc, malloc_usable_size, free_sized), "
             "glibc's extras (mallinfo2, malloc_trim, malloc_stats, malloc_info, mallopt) and "
             "every C++ operator new and delete, with glibc's contracts. It must be preloaded "
             "(LD_PRELOAD, or mysqld_safe --malloc-lib), never loaded with dlopen(3): its "
             "thread-local storage is initial-exec.") +
         "\n.PP\n";
  out += roff_text(
             "In libachunk_malloc.so, a housekeeping thread (achunk-bg, started at the first "
             "allocation) runs "
             "every release_interval_ms (1000): it unmaps the cached chunks idle past "
             "chunk_cache_ttl_ms, washes the free spans idle past span_idle_ms and answers "
             "achunk-dump, so a process that goes quiet gives its memory back. A forked child "
             "starts its own thread only once it has lived one interval since its first slow "
             "path or holds 16~MiB. The process publishes its counters in a stats region, a "
             "32~KiB memfd named achunk-stats (mode 0600), which achunk-dump(1) reads from "
             "outside and sends requests through (--set, --release); it goes away with the "
             "process.") +
         "\n.PP\n";
  out += roff_text(
             "libachunk.so and libachunk.a hold the same allocator as a library, with the C API "
             "and C++ API below; there the housekeeping thread and the stats region are off "
             "unless release_interval_ms and stats_region turn them on.") +
         "\n";

  out += ".SH ENVIRONMENT\n";
  out += tagged(bold("ACHUNK_CONF"),
                "\"key:value,key:value\": options (see OPTIONS), read once, when the allocator "
                "is first used (in libachunk_malloc.so, at the first allocation). Entries apply "
                "left to right; a later entry for the same key wins. Sizes accept K, M, G and T "
                "(powers of 1024; KB, KiB and either case too). Booleans accept true, false, 1, "
                "0, on and off. A bad entry (no ':', an unknown option, a bad or out-of-range "
                "value) prints one warning on stderr and leaves that option at its default; the "
                "other entries still apply.");
  out += tagged(bold("LD_PRELOAD"), so + " makes achunk the process's malloc; see ld.so(8).");

  out += options_section();

  out += ".SH \"C API\"\n";
  out += roff_text(
             "Declared in <achunk/achunk.h>, exported by libachunk.so, libachunk.a and "
             "libachunk_malloc.so (which also exports the malloc family under glibc's names). "
             "The malloc family has glibc's contracts: NULL with errno ENOMEM on failure, "
             "malloc(0) a unique pointer, a failed realloc leaves the object alone; sizes up to "
             "32~TiB and alignments up to 1~TiB, ENOMEM above. A free or malloc_usable_size of "
             "a pointer achunk did not hand out is reported and aborts (DIAGNOSTICS).") +
         "\n";
  out += api_lines(C_API, std::size(C_API));
  out += ".PP\n" +
         roff_text(
             "The C++ API, <achunk/achunk.hpp>, in namespace achunk (not in "
             "libachunk_malloc.so):") +
         "\n";
  out += api_lines(CXX_API, std::size(CXX_API));

  out += ".SH DIAGNOSTICS\n";
  out += tagged(bold("achunk: invalid free of 0x") + italic("ADDR") + bold(": ") + italic("DETAIL"),
                "A free, realloc, malloc_usable_size or operator delete of a pointer achunk did "
                "not hand out: static or stack memory, another allocator's, a pointer inside an "
                "object. DETAIL says what was found there, e.g. \"no chunk of achunk holds "
                "it (static, stack, foreign or interior memory)\" or \"not the start of an "
                "object ob_malloc handed out\".");
  out += tagged(bold("achunk: double free of 0x") + italic("ADDR") + bold(": ") + italic("DETAIL"),
                "The object (or chunk) is already free. DETAIL says how it was found, for an "
                "object with its size and label, e.g. \"object is already free (size=64 "
                "label=glibc_malloc)\".");
  out +=
      tagged(bold("achunk: heap corruption of 0x") + italic("ADDR") + bold(": ") + italic("DETAIL"),
             "The object's tail canary, the 8 bytes after its end, was overwritten (\"tail canary "
             "overwritten\": a write past the end), or its header was.");
  out += ".PP\n" +
         roff_text(
             "Each of these three is one line written to stderr with write(2), ADDR in 16 hex "
             "digits; then the process aborts (abort(3), SIGABRT). Every free is checked at "
             "the free itself, so the report and the abort come from the bad free's stack.") +
         "\n";
  out += tagged(bold("achunk: ignoring ACHUNK_CONF entry '") + italic("ENTRY") + bold("': ") +
                    italic("REASON") + bold(" (default kept)"),
                "Printed once per bad entry when the allocator starts; the process runs on.");
  out += tagged(bold("achunk: no stats region (memfd_create/mmap failed, errno ") + italic("N") +
                    bold("); achunk-dump cannot see this process"),
                "The process runs on without a region.");
  out += tagged(bold("achunk: could not start the release thread; idle release stays "
                     "free-driven"),
                "The process runs on; idle memory goes back only when later frees find it.");
  out += ".PP\n" +
         roff_text(
             "An allocation that would pass memory_limit first unmaps cached chunks, then "
             "fails, with nothing printed: the C calls return NULL with errno ENOMEM, operator "
             "new calls the new_handler, then throws std::bad_alloc. A library user reads the "
             "calling thread's reason with achunk::last_failure_message(), e.g. "
             "\"SERVER_HOLD_REACH_LIMIT: size=... hold=... limit=... (memory_limit reached after "
             "the chunk cache was flushed)\"; achunk-dump shows a live process's hold and "
             "limit.") +
         "\n";

  out += ".SH FILES\n";
  out += tagged(roff_text(so), "The drop-in malloc (Debian package libachunk-malloc0).");
  out += tagged(roff_text(p.libdir + "/libachunk.so, " + p.libdir + "/libachunk.a"),
                "The library, with " + p.includedir + "/achunk/, " + p.libdir +
                    "/pkgconfig/achunk.pc and " + p.libdir + "/cmake/achunk/ (libachunk-dev).");
  out += tagged(roff_text(p.bindir + "/achunk-dump"), "The live dump tool (achunk-tools).");
  out += tagged(roff_text(p.datadir + "/achunk/"),
                "Service drop-ins that preload the library into MariaDB and PostgreSQL, and a "
                "README saying how to apply each (achunk-tools).");
  out += tagged(roff_text("/proc/PID/fd/N -> /memfd:achunk-stats (deleted)"),
                "A live process's stats region, as achunk-dump finds it.");

  out += ".SH \"SEE ALSO\"\n.BR achunk\\-dump (1),\n.BR malloc (3),\n.BR ld.so (8)\n";
  return out;
}

}  // namespace achunk::man
