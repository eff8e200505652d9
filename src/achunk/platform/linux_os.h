// Platform layer: the real Linux implementation of Os. linux_os.cc is the only file in
// the project that calls mmap, munmap, mremap or madvise, or reads /proc and /sys
// (and memfd_create for the stats region, membarrier for process_barrier).
// Depends on os.h only.
#pragma once

#include "achunk/platform/os.h"

namespace achunk {

class LinuxOs final : public Os {
 public:
  [[nodiscard]] void* map_aligned(int64_t size, int64_t align, int* err) override;
  int unmap(void* addr, int64_t size) override;
  int unmap_head(void* addr, int64_t head, int64_t size) override;
  void* resize_aligned(void* addr, int64_t old_size, int64_t new_size, int64_t align,
                       int* err) override;
  int release_pages(void* addr, int64_t size) override;
  int64_t resident_bytes(void* addr, int64_t size) override;
  int64_t resident_pages(void* addr, int64_t size, unsigned char* vec) override;
  OsMemoryInfo memory_info() override;
  SharedRegion map_shared_region(const char* name, int64_t size, int* err) override;
  void unmap_shared_region(SharedRegion region, int64_t size) override;
  void drop_parents_region(SharedRegion region, int64_t size) override;
  bool process_barrier() override;
  bool process_barrier_available() override;
  int64_t process_id() override;
  int64_t process_start_time() override;
};

// The CPUs this process may run on (its affinity mask, so a container's or taskset's
// limit counts), at least 1. Allocates nothing.
int usable_cpus();

}  // namespace achunk
