// Test support: a fake Os that hands out real (heap) memory with the requested
// alignment, counts every call, checks that unmaps match maps (a whole mapping, or the
// head of one: unmap_head), and fails on demand.
// Like the kernel's, fresh mappings and released pages read as zero.
// Depends on the platform interface, and on LinuxOs for the real process barrier.
#pragma once

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <mutex>

#include "achunk/platform/linux_os.h"
#include "achunk/platform/os.h"

namespace achunk::testing {

class FakeOs final : public Os {
 public:
  ~FakeOs() override {
    for (auto& [addr, size] : live_) std::free(block_of(addr));
  }

  void* map_aligned(int64_t size, int64_t align, int* err) override {
    std::lock_guard<std::mutex> g(mu_);
    ++map_calls_;
    if (map_calls_ == fail_map_at_ || fail_maps_ > 0) {
      if (map_calls_ != fail_map_at_) --fail_maps_;
      *err = ENOMEM;
      return nullptr;
    }
    // aligned_alloc wants a multiple of the alignment (a placed chunk's is not).
    const int64_t rounded = (size + align - 1) / align * align;
    void* p = std::aligned_alloc(static_cast<size_t>(align), static_cast<size_t>(rounded));
    if (p == nullptr) {
      *err = ENOMEM;
      return nullptr;
    }
    if (zero_fill_) std::memset(p, 0, static_cast<size_t>(size));
    live_[p] = size;
    mapped_bytes_ += size;
    return p;
  }

  int unmap(void* addr, int64_t size) override {
    std::function<void()> hook;
    {
      std::lock_guard<std::mutex> g(mu_);
      ++unmap_calls_;
      if (unmap_calls_ == fail_unmap_at_) {  // the kernel's: the range stays mapped
        ++failed_unmaps_;
        return ENOMEM;
      }
      auto it = live_.find(addr);
      if (it == live_.end() || it->second != size) {
        ++bad_unmaps_;
        return EINVAL;
      }
      live_.erase(it);
      mapped_bytes_ -= size;
      hook = unmap_hook_;
      void* block = block_of(addr);
      block_.erase(addr);
      addr = block;
    }
    std::free(addr);
    if (hook) hook();
    return 0;
  }

  // The rest stays in the same heap block, which its own unmap frees. Counted as an
  // unmap, and failed with them on demand.
  int unmap_head(void* addr, int64_t head, int64_t size) override {
    std::lock_guard<std::mutex> g(mu_);
    ++unmap_calls_;
    ++head_unmaps_;
    if (unmap_calls_ == fail_unmap_at_) {  // the mapping stays whole, for its own unmap
      ++failed_head_unmaps_;
      return ENOMEM;
    }
    auto it = live_.find(addr);
    if (it == live_.end() || it->second != head + size || head <= 0) {
      ++bad_unmaps_;
      return EINVAL;
    }
    void* rest = static_cast<char*>(addr) + head;
    live_[rest] = size;
    block_[rest] = block_of(addr);
    live_.erase(it);
    block_.erase(addr);
    mapped_bytes_ -= head;
    return 0;
  }
  int64_t head_unmaps() const { return locked(head_unmaps_); }
  int64_t failed_head_unmaps() const { return locked(failed_head_unmaps_); }

  // Moves to a new block of the new size (contents kept up to the smaller size), as
  // mremap may; counted as a resize, and failed on demand like a map.
  void* resize_aligned(void* addr, int64_t old_size, int64_t new_size, int64_t align,
                       int* err) override {
    if (on_resize_) on_resize_();
    std::lock_guard<std::mutex> g(mu_);
    ++resize_calls_;
    if (fail_resizes_ > 0) {
      --fail_resizes_;
      *err = ENOMEM;
      return nullptr;
    }
    auto it = live_.find(addr);
    if (it == live_.end() || it->second != old_size) {
      ++bad_unmaps_;
      *err = EINVAL;
      return nullptr;
    }
    if (new_size <= old_size) {  // in place, as munmap of the tail
      it->second = new_size;
      mapped_bytes_ += new_size - old_size;
      return addr;
    }
    const int64_t rounded = (new_size + align - 1) / align * align;
    void* p = std::aligned_alloc(static_cast<size_t>(align), static_cast<size_t>(rounded));
    if (p == nullptr) {
      *err = ENOMEM;
      return nullptr;
    }
    const int64_t kept = old_size < new_size ? old_size : new_size;
    std::memcpy(p, addr, static_cast<size_t>(kept));
    if (zero_fill_ && new_size > kept) {
      std::memset(static_cast<char*>(p) + kept, 0, static_cast<size_t>(new_size - kept));
    }
    live_.erase(it);
    std::free(block_of(addr));
    block_.erase(addr);
    live_[p] = new_size;
    mapped_bytes_ += new_size - old_size;
    return p;
  }
  void fail_next_resizes(int n) {
    std::lock_guard<std::mutex> g(mu_);
    fail_resizes_ = n;
  }
  int64_t resize_calls() const { return locked(resize_calls_); }

  // Whatever the test set, capped at the range (default: all of it).
  int64_t resident_bytes(void*, int64_t size) override {
    if (on_resident_) on_resident_();
    std::lock_guard<std::mutex> g(mu_);
    ++resident_calls_;
    return resident_per_range_ < 0 || resident_per_range_ > size ? size : resident_per_range_;
  }
  // Every n-th page of the range in RAM (set_resident_every; default: every page).
  int64_t resident_pages(void*, int64_t size, unsigned char* vec) override {
    if (on_resident_) on_resident_();
    std::lock_guard<std::mutex> g(mu_);
    ++page_probes_;
    for (int64_t i = 0; i < (size + PAGE - 1) / PAGE; ++i) {
      vec[i] = static_cast<unsigned char>(i % resident_every_ == 0);
    }
    return PAGE;
  }
  void set_resident_every(int64_t n) {
    std::lock_guard<std::mutex> g(mu_);
    resident_every_ = n;
  }
  int64_t page_probes() const { return locked(page_probes_); }
  // Runs at the start of every resident_bytes and resident_pages call (set it before
  // other threads run).
  void set_resident_hook(std::function<void()> hook) { on_resident_ = std::move(hook); }
  // Runs at the start of every resize_aligned call (set it before other threads run).
  void set_resize_hook(std::function<void()> hook) { on_resize_ = std::move(hook); }
  // Runs at the start of every release_pages call (set it before other threads run).
  void set_release_hook(std::function<void()> hook) { on_release_ = std::move(hook); }
  void set_resident_per_range(int64_t bytes) {
    std::lock_guard<std::mutex> g(mu_);
    resident_per_range_ = bytes;
  }
  int64_t resident_calls() {
    std::lock_guard<std::mutex> g(mu_);
    return resident_calls_;
  }

  int release_pages(void* addr, int64_t size) override {
    if (on_release_) on_release_();
    std::lock_guard<std::mutex> g(mu_);
    ++release_calls_;
    if (release_calls_ == fail_release_at_ || fail_releases_ > 0) {
      if (release_calls_ != fail_release_at_) --fail_releases_;
      return EAGAIN;
    }
    if (zero_fill_) std::memset(addr, 0, static_cast<size_t>(size));  // MADV_DONTNEED's
    released_bytes_ += size;
    return 0;
  }

  OsMemoryInfo memory_info() override {
    OsMemoryInfo info;
    info.resident_size = 123 << 20;
    info.virtual_memory_used = 456 << 20;
    info.max_map_count = 65530;
    info.thp_mode[0] = 'm';
    info.thp_mode[1] = '\0';
    return info;
  }

  // The stats region: plain zeroed memory, no descriptor.
  SharedRegion map_shared_region(const char*, int64_t size, int* err) override {
    std::lock_guard<std::mutex> g(mu_);
    ++shared_maps_;
    void* p = std::calloc(1, static_cast<size_t>(size));
    if (p == nullptr) *err = ENOMEM;
    return {p, -1};
  }
  void unmap_shared_region(SharedRegion region, int64_t) override { std::free(region.addr); }
  // The real barrier (it orders the test's real threads), counted; off on demand, as on
  // a kernel without membarrier.
  bool process_barrier() override {
    {
      std::lock_guard<std::mutex> g(mu_);
      ++barrier_calls_;
      if (!barrier_on_) return false;
    }
    if (on_barrier_) on_barrier_();
    return real_.process_barrier();
  }
  // Runs at the start of every process_barrier call that passes one: a look has closed
  // what it will take (set it before other threads run).
  void set_barrier_hook(std::function<void()> hook) { on_barrier_ = std::move(hook); }
  bool process_barrier_available() override {
    {
      std::lock_guard<std::mutex> g(mu_);
      if (!barrier_on_) return false;
    }
    return real_.process_barrier_available();
  }
  void set_barrier(bool on) {
    std::lock_guard<std::mutex> g(mu_);
    barrier_on_ = on;
  }
  int64_t barrier_calls() const { return locked(barrier_calls_); }
  int64_t process_id() override { return pid_; }
  void set_process_id(int64_t pid) { pid_ = pid; }  // as a forked child sees itself
  int64_t process_start_time() override { return 777; }
  int64_t shared_maps() const { return locked(shared_maps_); }

  // Off: maps and releases leave the bytes as they are, for tests that map many big
  // chunks and never read memory they did not write (zeroing would dominate their run).
  void set_zero_fill(bool on) {
    std::lock_guard<std::mutex> g(mu_);
    zero_fill_ = on;
  }

  // The next n maps fail with ENOMEM.
  void fail_next_maps(int n) {
    std::lock_guard<std::mutex> g(mu_);
    fail_maps_ = n;
  }
  void fail_next_releases(int n) {
    std::lock_guard<std::mutex> g(mu_);
    fail_releases_ = n;
  }
  // Only the k-th call of that kind from now (1-based) fails; 0 clears it.
  enum class Call { MAP, RELEASE, UNMAP };
  void fail_nth(Call call, int64_t k) {
    std::lock_guard<std::mutex> g(mu_);
    if (call == Call::MAP) fail_map_at_ = k > 0 ? map_calls_ + k : 0;
    if (call == Call::RELEASE) fail_release_at_ = k > 0 ? release_calls_ + k : 0;
    if (call == Call::UNMAP) fail_unmap_at_ = k > 0 ? unmap_calls_ + k : 0;
  }
  int64_t calls(Call call) const {
    std::lock_guard<std::mutex> g(mu_);
    return call == Call::MAP ? map_calls_ : call == Call::RELEASE ? release_calls_ : unmap_calls_;
  }
  // Unmaps that failed on demand (their ranges are still in mapped_bytes()).
  int64_t failed_unmaps() const { return locked(failed_unmaps_); }
  // Runs after every successful unmap, outside the fake's own lock.
  void set_unmap_hook(std::function<void()> hook) {
    std::lock_guard<std::mutex> g(mu_);
    unmap_hook_ = std::move(hook);
  }

  int64_t map_calls() const { return locked(map_calls_); }
  int64_t unmap_calls() const { return locked(unmap_calls_); }
  int64_t release_calls() const { return locked(release_calls_); }
  int64_t released_bytes() const { return locked(released_bytes_); }
  int64_t bad_unmaps() const { return locked(bad_unmaps_); }
  int64_t mapped_bytes() const { return locked(mapped_bytes_); }
  int64_t live_mappings() const {
    std::lock_guard<std::mutex> g(mu_);
    return static_cast<int64_t>(live_.size());
  }

 private:
  int64_t pid_ = 4242;
  int64_t locked(const int64_t& v) const {
    std::lock_guard<std::mutex> g(mu_);
    return v;
  }

  mutable std::mutex mu_;
  LinuxOs real_;
  bool barrier_on_ = true;
  int64_t barrier_calls_ = 0;
  std::map<void*, int64_t> live_;
  // A mapping whose head was unmapped (unmap_head): its heap block, which starts before it.
  std::map<void*, void*> block_;
  void* block_of(void* addr) const {
    auto it = block_.find(addr);
    return it != block_.end() ? it->second : addr;
  }
  int64_t head_unmaps_ = 0;
  int64_t failed_head_unmaps_ = 0;
  int64_t shared_maps_ = 0;
  std::function<void()> unmap_hook_;
  std::function<void()> on_release_;
  std::function<void()> on_resize_;
  std::function<void()> on_barrier_;
  int fail_maps_ = 0;
  int fail_resizes_ = 0;
  std::function<void()> on_resident_;
  int64_t resize_calls_ = 0;
  int fail_releases_ = 0;
  int64_t fail_map_at_ = 0;
  int64_t fail_release_at_ = 0;
  int64_t fail_unmap_at_ = 0;
  int64_t failed_unmaps_ = 0;
  bool zero_fill_ = true;
  int64_t map_calls_ = 0;
  int64_t unmap_calls_ = 0;
  int64_t release_calls_ = 0;
  int64_t released_bytes_ = 0;
  int64_t resident_per_range_ = -1;
  int64_t resident_calls_ = 0;
  int64_t resident_every_ = 1;
  int64_t page_probes_ = 0;
  static constexpr int64_t PAGE = 4096;
  int64_t bad_unmaps_ = 0;
  int64_t mapped_bytes_ = 0;
};

}  // namespace achunk::testing
