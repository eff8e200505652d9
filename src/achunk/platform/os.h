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

  // Unmaps the first `head` bytes of the mapping [addr, addr+head+size) made by
  // map_aligned, leaving [addr+head, +size) as if map_aligned had made it (unmap and
  // resize_aligned then take it with its own size). Returns 0, or the errno with the
  // mapping as it was.
  virtual int unmap_head(void* addr, int64_t head, int64_t size) = 0;

  // Resizes the mapping [addr, addr+old_size), made by map_aligned with `align`, to
  // new_size bytes, keeping its pages and contents. A shrink gives the tail back and stays
  // in place; a grow may move, to an address aligned to `align`. Returns the mapping's
  // address, or nullptr with *err set and the old mapping as it was.
  [[nodiscard]] virtual void* resize_aligned(void* addr, int64_t old_size, int64_t new_size,
                                             int64_t align, int* err) = 0;

  // Gives the physical pages of [addr, addr+size) back; the range stays mapped and reads
  // as zero afterwards. Returns 0 or the errno.
  virtual int release_pages(void* addr, int64_t size) = 0;

  // Bytes of [addr, addr+size) backed by physical pages right now (page-aligned `addr`),
  // or -1 when the OS cannot tell.
  virtual int64_t resident_bytes(void* addr, int64_t size) = 0;
  // The same page by page, in one call: one byte per page of [addr, addr+size) into vec
  // (size / page size bytes, rounded up), bit 0 set for a page in RAM. Returns the page
  // size, or -1 when the OS cannot tell.
  virtual int64_t resident_pages(void* addr, int64_t size, unsigned char* vec) = 0;

  virtual OsMemoryInfo memory_info() = 0;

  // The live stats region: an anonymous shared-memory file (memfd, close-on-exec, mode
  // 0600) of `size` zeroed bytes, mapped shared read-write, so another process of the
  // same user can map it through /proc/PID/fd. addr nullptr and *err on failure.
  // A forked child inherits the descriptor but not the mapping when `shared_with_child`
  // is false (Linux MADV_DONTFORK), so a fork copies none of the region's page tables.
  struct SharedRegion {
    void* addr = nullptr;
    int fd = -1;
    bool shared_with_child = true;
  };
  virtual SharedRegion map_shared_region(const char* name, int64_t size, int* err) {
    (void)name;
    (void)size;
    *err = 38;  // ENOSYS
    return {};
  }
  virtual void unmap_shared_region(SharedRegion region, int64_t size) {
    (void)region;
    (void)size;
  }
  // In a forked child, the parent's region: closes the inherited descriptor, and unmaps
  // the mapping only if the child has it (no write to it either way).
  virtual void drop_parents_region(SharedRegion region, int64_t size) {
    unmap_shared_region(region, size);
  }
  // Makes every thread of this process that is running now pass a full memory barrier
  // before it returns (Linux membarrier, private expedited): a thread that only stores a
  // flag before reading shared state then needs no fence of its own. False, and nothing
  // done, when the kernel cannot.
  virtual bool process_barrier() { return false; }
  // Whether process_barrier() can work here (asked once, without the barrier's cost).
  virtual bool process_barrier_available() { return false; }
  // This process's id and its start time (field 22 of /proc/self/stat, clock ticks after
  // boot), which together name it even after its pid is reused; -1 when unknown.
  virtual int64_t process_id() { return -1; }
  virtual int64_t process_start_time() { return -1; }
};

}  // namespace achunk
