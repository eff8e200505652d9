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

void* LinuxOs::map_aligned(int64_t size, int64_t align, int* err) {
  const int prot = PROT_READ | PROT_WRITE;
  const int flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  void* p = ::mmap(nullptr, static_cast<size_t>(size), prot, flags, -1, 0);
  if (p == MAP_FAILED) {
    *err = errno;
    return nullptr;
  }
  if ((reinterpret_cast<uintptr_t>(p) & (align - 1)) == 0) return p;
  // The kernel gave an unaligned address: map a larger window and trim both ends, which
  // costs two extra munmaps but never leaves a hole in the middle of a mapping.
  ::munmap(p, static_cast<size_t>(size));
  const int64_t window = size + align;
  char* w = static_cast<char*>(::mmap(nullptr, static_cast<size_t>(window), prot, flags, -1, 0));
  if (w == MAP_FAILED) {
    *err = errno;
    return nullptr;
  }
  const uintptr_t base = reinterpret_cast<uintptr_t>(w);
  const uintptr_t aligned =
      (base + static_cast<uintptr_t>(align) - 1) & ~(static_cast<uintptr_t>(align) - 1);
  const int64_t head = static_cast<int64_t>(aligned - base);
  const int64_t tail = window - head - size;
  if (head > 0) ::munmap(w, static_cast<size_t>(head));
  if (tail > 0) ::munmap(reinterpret_cast<char*>(aligned) + size, static_cast<size_t>(tail));
  return reinterpret_cast<void*>(aligned);
}

int LinuxOs::unmap(void* addr, int64_t size) {
  return ::munmap(addr, static_cast<size_t>(size)) == 0 ? 0 : errno;
}

void* LinuxOs::resize_aligned(void* addr, int64_t old_size, int64_t new_size, int64_t align,
                              int* err) {
  char* const base = static_cast<char*>(addr);
  if (new_size <= old_size) {
    if (new_size < old_size &&
        ::munmap(base + new_size, static_cast<size_t>(old_size - new_size)) != 0) {
      *err = errno;
      return nullptr;
    }
    return addr;
  }
  // In place when the address space right after it is free.
  void* p = ::mremap(addr, static_cast<size_t>(old_size), static_cast<size_t>(new_size), 0);
  if (p != MAP_FAILED) return p;
  // Elsewhere: reserve an aligned window and move the pages into it (page tables only,
  // no copy), then trim the window's ends.
  const int64_t window = new_size + align;
  char* w = static_cast<char*>(::mmap(nullptr, static_cast<size_t>(window), PROT_NONE,
                                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0));
  if (w == MAP_FAILED) {
    *err = errno;
    return nullptr;
  }
  const uintptr_t start = reinterpret_cast<uintptr_t>(w);
  char* const to = reinterpret_cast<char*>((start + static_cast<uintptr_t>(align) - 1) &
                                           ~(static_cast<uintptr_t>(align) - 1));
  p = ::mremap(addr, static_cast<size_t>(old_size), static_cast<size_t>(new_size),
               MREMAP_MAYMOVE | MREMAP_FIXED, to);
  if (p == MAP_FAILED) {
    *err = errno;
    ::munmap(w, static_cast<size_t>(window));
    return nullptr;
  }
  const int64_t head = to - w;
  const int64_t tail = window - head - new_size;
  if (head > 0) ::munmap(w, static_cast<size_t>(head));
  if (tail > 0) ::munmap(to + new_size, static_cast<size_t>(tail));
  return p;
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
  return {p, fd};
}

void LinuxOs::unmap_shared_region(SharedRegion region, int64_t size) {
  if (region.addr != nullptr) ::munmap(region.addr, static_cast<size_t>(size));
  if (region.fd >= 0) ::close(region.fd);
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
