// Platform layer: the operating-system services the chunk layer needs, behind an
// interface so tests can inject a fake that counts calls and fails on demand.
// Depends on nothing inside achunk.
#pragma once

#include <cstdint>

namespace achunk {

// Figures the dump reports about the process and the kernel. Filled without allocating.
struct OsMemoryInfo {
  int64_t resident_size = -1;        // bytes of RSS, -1 when unknown
  int64_t virtual_memory_used = -1;  // bytes of address space, -1 when unknown
  int64_t max_map_count = -1;        // vm.max_map_count, -1 when unknown
  char thp_mode[16] = "unknown";     // the selected transparent-hugepage mode
};

class Os {
 public:
  virtual ~Os() = default;

  // Maps `size` bytes of zeroed, private, read-write memory at an address aligned to
  // `align` (a power of two). On failure returns nullptr and stores the errno in *err.
  [[nodiscard]] virtual void* map_aligned(int64_t size, int64_t align, int* err) = 0;

  // Returns 0 or the errno of the failed call.
  virtual int unmap(void* addr, int64_t size) = 0;

  // Gives the physical pages of [addr, addr+size) back; the range stays mapped and reads
  // as zero afterwards. Returns 0 or the errno.
  virtual int release_pages(void* addr, int64_t size) = 0;

  // Bytes of [addr, addr+size) backed by physical pages right now (page-aligned `addr`),
  // or -1 when the OS cannot tell.
  virtual int64_t resident_bytes(void* addr, int64_t size) = 0;

  virtual OsMemoryInfo memory_info() = 0;
};

}  // namespace achunk
