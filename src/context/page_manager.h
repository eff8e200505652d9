// Context layer: ObPageManager, a thread's private source of pages for the memory
// contexts that ask for it (USE_TL_PAGE_OPTIONAL, "use_pm"). Its BlockSet belongs to one
// thread, so taking and returning pages needs no lock; it keeps freed pages of up to
// PAGE_CACHE_BLOCKS blocks in all for the next context (a request's contexts come and
// go, and the block set's split and coalesce would otherwise run for every page) and at
// most one free 2 MiB chunk of its own, and everything goes back to the (tenant, ctx) allocator
// when the thread exits. Calls from any other thread are refused (reported, nothing touched).
// Depends on the object layer.
#pragma once

#include "alloc/block/block_set.h"
#include "alloc/object/tenant_ctx_allocator.h"
#include "context/block_source.h"

namespace achunk {

class ObPageManager final : public BlockSource, private ChunkSource {
 public:
  // The calling thread's page manager for `ta`, created on first use; nullptr when the
  // thread's page manager serves another (tenant, ctx) or cannot be created.
  static ObPageManager* for_this_thread(ObTenantCtxAllocator& ta);
  // The calling thread's page manager, if it has one.
  static ObPageManager* current();

  explicit ObPageManager(ObTenantCtxAllocator& ta);
  ~ObPageManager() override;

  ABlock* alloc_block(int64_t bytes) override;
  void free_block(ABlock* block) override;

  static constexpr int PAGE_CACHE = 16;          // pages kept at most
  static constexpr int PAGE_CACHE_BLOCKS = 32;   // 256 KiB at most
  static constexpr int PAGE_CACHE_MAX_SPAN = 8;  // blocks; larger pages go straight back

  bool owned_by_this_thread() const { return owner_ == this_thread_marker(); }
  ObTenantCtxAllocator& tenant_ctx() const { return ta_; }
  int64_t hold() const { return block_set_.hold() + (cached_ != nullptr ? cached_->hold() : 0); }
  // Bytes of pages contexts hold (cached free pages not included).
  int64_t used() const { return block_set_.used() - cached_blocks_ * ABLOCK_SIZE; }
  int cached_pages() const { return page_cached_; }
  int cached_blocks() const { return cached_blocks_; }
  // Thread exit: frees everything if no page is in use, else reports and keeps it.
  void on_thread_exit();

 private:
  AChunk* alloc_chunk(int64_t size, int64_t head_align) override;
  void free_chunk(AChunk* chunk) override;
  AChunk* resize_chunk(AChunk* chunk, int64_t size) override {
    return ta_.resize_chunk(chunk, size);
  }
  int64_t trim_chunk(AChunk* chunk) override { return ta_.trim_chunk(chunk); }
  int release_pages(void* addr, int64_t size) override { return ta_.release_pages(addr, size); }
  int64_t resident_pages(void* addr, int64_t size, unsigned char* vec) override {
    return ta_.resident_pages(addr, size, vec);
  }
  int64_t now_us() override { return ta_.now_us(); }
  int64_t span_idle_us() override { return ta_.span_idle_us(); }
  bool process_barrier() override { return ta_.process_barrier(); }
  bool process_barrier_available() override { return ta_.process_barrier_available(); }

  // Gives the cached pages back to the block set.
  void drop_page_cache();

  ObTenantCtxAllocator& ta_;
  const void* owner_;               // the owning thread's this_thread_marker()
  ABlock* page_cache_[PAGE_CACHE];  // a stack: the page freed last is reused first
  int page_cached_ = 0;
  int cached_blocks_ = 0;
  AChunk* cached_ = nullptr;  // one free normal chunk kept for the next page
  BlockSet block_set_;
};

}  // namespace achunk
