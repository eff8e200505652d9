// Context layer: ObPageManager, a thread's private source of pages for the memory
// contexts that ask for it (USE_TL_PAGE_OPTIONAL, "use_pm"). Its BlockSet belongs to one
// thread, so taking and returning pages needs no lock; it keeps at most one free 2 MiB
// chunk of its own, and everything goes back to the (tenant, ctx) allocator when the
// thread exits. Calls from any other thread are refused (reported, nothing touched).
// Depends on the object layer.
#pragma once

#include <pthread.h>

#include "alloc/block_set.h"
#include "alloc/tenant_ctx_allocator.h"
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

  bool owned_by_this_thread() const { return pthread_equal(owner_, pthread_self()) != 0; }
  ObTenantCtxAllocator& tenant_ctx() const { return ta_; }
  int64_t hold() const { return block_set_.hold() + (cached_ != nullptr ? cached_->hold() : 0); }
  int64_t used() const { return block_set_.used(); }
  // Thread exit: frees everything if no page is in use, else reports and keeps it.
  void on_thread_exit();

 private:
  AChunk* alloc_chunk(int64_t size) override;
  void free_chunk(AChunk* chunk) override;
  int release_pages(void* addr, int64_t size) override { return ta_.release_pages(addr, size); }

  ObTenantCtxAllocator& ta_;
  pthread_t owner_;
  AChunk* cached_ = nullptr;  // one free normal chunk kept for the next page
  BlockSet block_set_;
};

}  // namespace achunk
