// Platform layer: the real Linux implementation of Os. linux_os.cc is the only file in
// the project that calls mmap, munmap or madvise, or reads /proc and /sys.
// Depends on os.h only.
#pragma once

#include "achunk/platform/os.h"

namespace achunk {

class LinuxOs final : public Os {
 public:
  [[nodiscard]] void* map_aligned(int64_t size, int64_t align, int* err) override;
  int unmap(void* addr, int64_t size) override;
  int release_pages(void* addr, int64_t size) override;
  int64_t resident_bytes(void* addr, int64_t size) override;
  OsMemoryInfo memory_info() override;
};

}  // namespace achunk
