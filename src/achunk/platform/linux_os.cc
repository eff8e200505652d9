#include "achunk/platform/linux_os.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/membarrier.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace achunk {

namespace {

// Reads a small file into buf with raw syscalls: stdio would allocate, and this runs
// inside the allocator.
int64_t read_small_file(const char* path, char* buf, int64_t cap) {
  int fd = ::open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  int64_t n = 0;
  while (n < cap - 1) {
    ssize_t r = ::read(fd, buf + n, static_cast<size_t>(cap - 1 - n));
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) break;
    n += r;
  }
  ::close(fd);
  buf[n] = '\0';
  return n;
}

int64_t parse_leading_int(const char* s, const char** end) {
  while (*s == ' ' || *s == '\t') ++s;
  int64_t v = 0;
  bool any = false;
  while (*s >= '0' && *s <= '9') {
    v = v * 10 + (*s - '0');
    ++s;
    any = true;
  }
  if (end != nullptr) *end = s;
  return any ? v : -1;
}

int madvise_retry(void* addr, int64_t size, int advice) {
  for (;;) {
    if (::madvise(addr, static_cast<size_t>(size), advice) == 0) return 0;
    // EAGAIN is transient (kernel resources); anything else is final.
    if (errno != EAGAIN) return errno;
  }
}

}  // namespace

namespace {

constexpr int RW = PROT_READ | PROT_WRITE;
constexpr int ANON = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;

// A mapping of RESERVE_FROM bytes or more keeps the address space after it reserved
// (PROT_NONE), up to RESERVE_MIN or the next power of two: it grows and shrinks in place
// inside that, and a buffer grown without bound moves O(log size) times. A moved mapping's
// page-table entries are all rewritten, and on a shadow-paged VM each of its pages then
// costs about half a fault at its next touch.
constexpr int64_t RESERVE_FROM = int64_t{4} << 20;
constexpr int64_t RESERVE_MIN = int64_t{32} << 20;

// The address space a mapping of `size` bytes spans, reservation included: a function of
// the size alone, so unmap needs nothing else.
int64_t reserved_size(int64_t size) {
  if (size < RESERVE_FROM) return size;
  if (size <= RESERVE_MIN) return RESERVE_MIN;
  return int64_t{1} << (64 - __builtin_clzll(static_cast<uint64_t>(size - 1)));
}

char* align_up(char* p, int64_t align) {
  const uintptr_t a = static_cast<uintptr_t>(align);
  return reinterpret_cast<char*>((reinterpret_cast<uintptr_t>(p) + a - 1) & ~(a - 1));
}

// Maps [addr, addr+size) anew with `prot`, replacing what was there (part of the
// reservation, or pages given back): 0 or the errno.
int map_over(char* addr, int64_t size, int prot) {
  return ::mmap(addr, static_cast<size_t>(size), prot, ANON | MAP_FIXED, -1, 0) == MAP_FAILED
             ? errno
             : 0;
}

// `span` bytes mapped with `prot` at an `align`-aligned address: a window `align` bytes
// larger, its ends trimmed (two extra munmaps, never a hole inside). nullptr and errno
// on failure.
char* map_window_aligned(int64_t span, int64_t align, int prot, int* err) {
  const int64_t window = span + align;
  char* w = static_cast<char*>(::mmap(nullptr, static_cast<size_t>(window), prot, ANON, -1, 0));
  if (w == MAP_FAILED) {
    *err = errno;
    return nullptr;
  }
  char* const at = align_up(w, align);
  const int64_t head = at - w;
  const int64_t tail = window - head - span;
  if (head > 0) ::munmap(w, static_cast<size_t>(head));
  if (tail > 0) ::munmap(at + span, static_cast<size_t>(tail));
  return at;
}

// Reserves [at, at+size) (PROT_NONE) if nothing is mapped there: whether it did. A kernel
// before 4.17 takes MAP_FIXED_NOREPLACE as a hint and may map elsewhere: undone.
bool reserve_at(char* at, int64_t size) {
  void* p = ::mmap(at, static_cast<size_t>(size), PROT_NONE, ANON | MAP_FIXED_NOREPLACE, -1, 0);
  if (p != MAP_FAILED && p != at) ::munmap(p, static_cast<size_t>(size));
  return p == at;
}

// Address space to map into or move pages to: `span` bytes, PROT_NONE, `align`-aligned.
char* reserve_aligned(int64_t span, int64_t align, int* err) {
  return map_window_aligned(span, align, PROT_NONE, err);
}

// Moves [from, from+size) onto `to` (address space of the caller's) by pieces of `unit`
// bytes. Each source piece stays mapped (MREMAP_DONTUNMAP), so nothing else can be mapped
// there, until every piece has moved; a failure moves them all back: 0 or the errno.
int move_by_units(char* from, char* to, int64_t size, int64_t unit) {
  int64_t moved = 0;
  while (moved < size &&
         ::mremap(from + moved, static_cast<size_t>(unit), static_cast<size_t>(unit),
                  MREMAP_MAYMOVE | MREMAP_FIXED | MREMAP_DONTUNMAP, to + moved) != MAP_FAILED) {
    moved += unit;
  }
  if (moved == size) return 0;
  const int err = errno;
  for (int64_t back = 0; back < moved; back += unit) {
    ::mremap(to + back, static_cast<size_t>(unit), static_cast<size_t>(unit),
             MREMAP_MAYMOVE | MREMAP_FIXED, from + back);
  }
  return err;
}

}  // namespace

void* LinuxOs::map_aligned(int64_t size, int64_t align, int* err) {
  const int64_t reserved = reserved_size(size);
  if (reserved > size) {
    char* at = reserve_aligned(reserved, align, err);
    if (at == nullptr) return nullptr;
    if ((*err = map_over(at, size, RW)) != 0) {
      ::munmap(at, static_cast<size_t>(reserved));
      return nullptr;
    }
    return at;
  }
  void* p = ::mmap(nullptr, static_cast<size_t>(size), RW, ANON, -1, 0);
  if (p == MAP_FAILED) {
    *err = errno;
    return nullptr;
  }
  if ((reinterpret_cast<uintptr_t>(p) & (align - 1)) == 0) return p;
  // The kernel gave an unaligned address: map an aligned window instead.
  ::munmap(p, static_cast<size_t>(size));
  return map_window_aligned(size, align, RW, err);
}

int LinuxOs::unmap(void* addr, int64_t size) {
  return ::munmap(addr, static_cast<size_t>(reserved_size(size))) == 0 ? 0 : errno;
}

int LinuxOs::unmap_head(void* addr, int64_t head, int64_t size) {
  // The rest's reservation must end where reserved_size(size) says, as a mapping of its
  // own would: the old one (of head + size) may end before or after that.
  char* const rest = static_cast<char*>(addr) + head;
  char* const old_end = static_cast<char*>(addr) + reserved_size(head + size);
  char* const new_end = rest + reserved_size(size);
  if (new_end > old_end && !reserve_at(old_end, new_end - old_end)) return ENOMEM;
  if (::munmap(addr, static_cast<size_t>(head)) != 0) {
    const int err = errno;
    if (new_end > old_end) ::munmap(old_end, static_cast<size_t>(new_end - old_end));
    return err;
  }
  if (new_end < old_end) ::munmap(new_end, static_cast<size_t>(old_end - new_end));
  return 0;
}

void* LinuxOs::resize_aligned(void* addr, int64_t old_size, int64_t new_size, int64_t align,
                              int* err) {
  char* const base = static_cast<char*>(addr);
  const int64_t old_span = reserved_size(old_size);
  const int64_t new_span = reserved_size(new_size);
  if (new_size <= old_size) {
    // In place: the pages past the new size go back, what lies between it and the new
    // span stays reserved, and the address space past the span goes (or, should that
    // munmap fail, stays reserved for good: address space, not memory).
    const int64_t kept_end = old_size < new_span ? old_size : new_span;
    if (kept_end > new_size &&
        (*err = map_over(base + new_size, kept_end - new_size, PROT_NONE)) != 0) {
      return nullptr;
    }
    if (new_span < old_span) ::munmap(base + new_span, static_cast<size_t>(old_span - new_span));
    return addr;
  }
  int64_t span = old_span;  // the reservation's end
  if (new_span > old_span) {
    // Extend the reservation when the address space right after it is free.
    if (reserve_at(base + old_span, new_span - old_span)) span = new_span;
  }
  if (span >= new_size) {
    // mmap over the reserved pages, never munmap and mremap: the range would stand
    // unmapped in between, and another thread's mmap may land there.
    if ((*err = map_over(base + old_size, new_size - old_size, RW)) == 0) return addr;
    if (span > old_span) ::munmap(base + old_span, static_cast<size_t>(span - old_span));
    return nullptr;
  }
  // Elsewhere: reserve an aligned span, map the grown part in it, and move the pages in
  // (page tables only, no copy); the old reservation goes.
  char* const to = reserve_aligned(new_span, align, err);
  if (to == nullptr) return nullptr;
  if ((*err = map_over(to + old_size, new_size - old_size, RW)) != 0) {
    ::munmap(to, static_cast<size_t>(new_span));
    return nullptr;
  }
  const size_t old_bytes = static_cast<size_t>(old_size);
  if (::mremap(addr, old_bytes, old_bytes, MREMAP_MAYMOVE | MREMAP_FIXED, to) != MAP_FAILED) {
    if (span > old_size) ::munmap(base + old_size, static_cast<size_t>(span - old_size));
    return to;
  }
  *err = errno;
  // EFAULT: more than one VMA (grown in place after a move), which kernels before 6.17
  // move only piece by piece, having unmapped [to, to + old_size) first. Taken back
  // before the pieces go there; if another thread's mmap got in first, that range is
  // not ours to touch.
  if (*err == EFAULT) {
    if (!reserve_at(to, old_size)) {
      ::munmap(to + old_size, static_cast<size_t>(new_span - old_size));
      return nullptr;
    }
    if ((*err = move_by_units(base, to, old_size, align)) == 0) {
      ::munmap(base, static_cast<size_t>(span));
      return to;
    }
  }
  ::munmap(to, static_cast<size_t>(new_span));
  return nullptr;
}

int LinuxOs::release_pages(void* addr, int64_t size) {
  return madvise_retry(addr, size, MADV_DONTNEED);
}

int64_t LinuxOs::resident_bytes(void* addr, int64_t size) {
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  // One chunk's worth of pages per call, so the vector stays on the stack.
  constexpr int64_t PIECE_PAGES = 512;
  unsigned char vec[PIECE_PAGES];
  int64_t resident = 0;
  for (int64_t off = 0; off < size; off += PIECE_PAGES * page) {
    const int64_t len = size - off < PIECE_PAGES * page ? size - off : PIECE_PAGES * page;
    if (::mincore(static_cast<char*>(addr) + off, static_cast<size_t>(len), vec) != 0) return -1;
    const int64_t pages = (len + page - 1) / page;
    for (int64_t i = 0; i < pages; ++i) resident += (vec[i] & 1) * page;
  }
  return resident;
}

int64_t LinuxOs::resident_pages(void* addr, int64_t size, unsigned char* vec) {
  if (::mincore(addr, static_cast<size_t>(size), vec) != 0) return -1;
  return ::sysconf(_SC_PAGESIZE);
}

OsMemoryInfo LinuxOs::memory_info() {
  OsMemoryInfo info;
  char buf[256];
  const int64_t page = ::sysconf(_SC_PAGESIZE);
  if (read_small_file("/proc/self/statm", buf, sizeof(buf)) > 0) {
    const char* p = buf;
    const int64_t vm_pages = parse_leading_int(p, &p);
    const int64_t rss_pages = parse_leading_int(p, &p);
    if (vm_pages >= 0) info.virtual_memory_used = vm_pages * page;
    if (rss_pages >= 0) info.resident_size = rss_pages * page;
  }
  if (read_small_file("/proc/sys/vm/max_map_count", buf, sizeof(buf)) > 0) {
    info.max_map_count = parse_leading_int(buf, nullptr);
  }
  // The file reads like "always [madvise] never": the bracketed word is the mode in force.
  if (read_small_file("/sys/kernel/mm/transparent_hugepage/enabled", buf, sizeof(buf)) > 0) {
    const char* open = std::strchr(buf, '[');
    const char* close = open != nullptr ? std::strchr(open, ']') : nullptr;
    if (close != nullptr) {
      const size_t n = static_cast<size_t>(close - open - 1);
      if (n < sizeof(info.thp_mode)) {
        std::memcpy(info.thp_mode, open + 1, n);
        info.thp_mode[n] = '\0';
      }
    }
  }
  return info;
}

Os::SharedRegion LinuxOs::map_shared_region(const char* name, int64_t size, int* err) {
  // The raw syscall: glibc's wrapper may be missing on older systems, and this runs
  // inside the allocator.
  const int fd = static_cast<int>(::syscall(SYS_memfd_create, name, MFD_CLOEXEC));
  if (fd < 0) {
    *err = errno;
    return {};
  }
  // memfd inodes start 0777; the kernel's ptrace rule already guards /proc/PID/fd, this
  // keeps the file itself private too.
  if (::fchmod(fd, 0600) != 0 || ::ftruncate(fd, static_cast<off_t>(size)) != 0) {
    *err = errno;
    ::close(fd);
    return {};
  }
  void* p = ::mmap(nullptr, static_cast<size_t>(size), PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) {
    *err = errno;
    ::close(fd);
    return {};
  }
  // Not inherited: a child makes its own region, and a fork then neither copies this
  // mapping's page tables nor needs an munmap in the child.
  const bool shared_with_child = ::madvise(p, static_cast<size_t>(size), MADV_DONTFORK) != 0;
  return {p, fd, shared_with_child};
}

void LinuxOs::unmap_shared_region(SharedRegion region, int64_t size) {
  if (region.addr != nullptr) ::munmap(region.addr, static_cast<size_t>(size));
  if (region.fd >= 0) ::close(region.fd);
}

// Cold: with the child's other fork code, so a forked child faults in few text pages.
__attribute__((cold)) void LinuxOs::drop_parents_region(SharedRegion region, int64_t size) {
  if (region.shared_with_child) {
    unmap_shared_region(region, size);
  } else if (region.fd >= 0) {
    ::close(region.fd);
  }
}

bool LinuxOs::process_barrier() {
  // Called from inside malloc: errno is the caller's.
  const int saved = errno;
  bool ok = ::syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
  // Registration is per process (a forked child is a new one), so it is asked for when
  // the kernel says it is missing.
  if (!ok && errno == EPERM &&
      ::syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0) {
    ok = ::syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0) == 0;
  }
  errno = saved;
  return ok;
}

bool LinuxOs::process_barrier_available() {
  const int saved = errno;
  const long cmds = ::syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
  errno = saved;
  return cmds > 0 && (cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED) != 0;
}

int64_t LinuxOs::process_id() {
  return ::getpid();
}

int64_t LinuxOs::process_start_time() {
  char buf[1024];
  if (read_small_file("/proc/self/stat", buf, sizeof(buf)) <= 0) return -1;
  // The command name in parentheses may hold spaces: count fields after the last ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return -1;
  ++p;
  // The field after ')' is field 3 (state); the start time is field 22.
  for (int field = 3; field < 22; ++field) {
    while (*p == ' ') ++p;
    while (*p != ' ' && *p != '\0') ++p;
    if (*p == '\0') return -1;
  }
  return parse_leading_int(p, nullptr);
}

int usable_cpus() {
  cpu_set_t set;
  if (sched_getaffinity(0, sizeof(set), &set) != 0) return 1;
  const int n = CPU_COUNT(&set);
  return n > 0 ? n : 1;
}

}  // namespace achunk
