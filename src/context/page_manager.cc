#include "context/page_manager.h"

#include <mutex>
#include <new>

#include "achunk/base/buf_writer.h"
#include "achunk/base/error_report.h"
#include "achunk/base/tls.h"

namespace achunk {

namespace {

ACHUNK_TLS ObPageManager* tl_page_manager;
pthread_key_t g_exit_key;
std::once_flag g_exit_key_once;

void exit_page_manager(void* pm) {
  static_cast<ObPageManager*>(pm)->on_thread_exit();
}

void report_cross_thread(const void* ptr, const char* what) {
  char detail[160];
  BufWriter(detail, sizeof(detail))
      .str(what)
      .str(" from a thread that does not own the page manager");
  report_error(ErrorKind::INVALID_FREE, ptr, detail);
}

}  // namespace

ObPageManager* ObPageManager::current() {
  return tl_page_manager;
}

ObPageManager* ObPageManager::for_this_thread(ObTenantCtxAllocator& ta) {
  if (ObPageManager* pm = tl_page_manager) return &pm->ta_ == &ta ? pm : nullptr;
  // A span of the ctx's own blocks, not an object of a thread heap: at thread exit the
  // heaps may already be gone when this page manager frees itself.
  ABlock* block = ta.object_set().alloc_span(sizeof(ObPageManager));
  if (block == nullptr) return nullptr;
  auto* pm = new (block_data(block)) ObPageManager(ta);
  tl_page_manager = pm;
  std::call_once(g_exit_key_once, [] { pthread_key_create(&g_exit_key, &exit_page_manager); });
  pthread_setspecific(g_exit_key, pm);
  return pm;
}

ObPageManager::ObPageManager(ObTenantCtxAllocator& ta)
    : ta_(ta),
      owner_(this_thread_marker()),
      block_set_(*this, this, BlockSet::OWNER_PAGE_MANAGER) {}

ObPageManager::~ObPageManager() {
  drop_page_cache();
  if (cached_ != nullptr) ta_.free_chunk(cached_);
}

void ObPageManager::drop_page_cache() {
  while (page_cached_ > 0) block_set_.free_block(page_cache_[--page_cached_]);
  cached_blocks_ = 0;
}

void ObPageManager::on_thread_exit() {
  if (tl_page_manager == this) tl_page_manager = nullptr;
  drop_page_cache();
  if (block_set_.used() != 0) {
    char line[200];
    BufWriter w(line, sizeof(line));
    w.str("achunk: thread exits with ").num(block_set_.used());
    w.str(" bytes of use_pm context pages still in use; the page manager is kept (a leak)");
    write_stderr_line(line);
    return;
  }
  ObTenantCtxAllocator& ta = ta_;
  ABlock* block = BlockSet::ptr2block(this);
  this->~ObPageManager();
  ta.object_set().free_span(block);
}

ABlock* ObPageManager::alloc_block(int64_t bytes) {
  if (!owned_by_this_thread()) {
    report_cross_thread(this, "use_pm page allocation");
    return nullptr;
  }
  // The newest cached page of exactly the size a fresh span would have.
  const int64_t blocks = (bytes + ABLOCK_SIZE - 1) / ABLOCK_SIZE;
  for (int i = page_cached_ - 1; i >= 0; --i) {
    ABlock* block = page_cache_[i];
    if (block->nblocks_ != blocks) continue;
    // Keep the stack order: the newer entries move down one.
    for (int j = i; j + 1 < page_cached_; ++j) page_cache_[j] = page_cache_[j + 1];
    --page_cached_;
    cached_blocks_ -= static_cast<int>(blocks);
    return block;
  }
  return block_set_.alloc_block(bytes);
}

void ObPageManager::free_block(ABlock* block) {
  if (!owned_by_this_thread()) {
    report_cross_thread(block, "use_pm page free");
    return;
  }
  const int blocks = block->nblocks_;
  if (!block->dedicated() && blocks <= PAGE_CACHE_MAX_SPAN && page_cached_ < PAGE_CACHE &&
      cached_blocks_ + blocks <= PAGE_CACHE_BLOCKS) {
    page_cache_[page_cached_++] = block;
    cached_blocks_ += blocks;
    return;
  }
  block_set_.free_block(block);
}

AChunk* ObPageManager::alloc_chunk(int64_t size, int64_t head_align) {
  if (cached_ != nullptr && head_align == 0 && chunk_aligned_size(size) == ACHUNK_ALIGN) {
    AChunk* chunk = cached_;
    cached_ = nullptr;
    chunk->alloc_bytes_ = size;
    return chunk;
  }
  return ta_.alloc_chunk(size, head_align);
}

void ObPageManager::free_chunk(AChunk* chunk) {
  // Keep one normal chunk: a request loop on this thread then never goes past its own
  // page manager for pages. The chunk stays charged to the ctx.
  if (cached_ == nullptr && chunk->aligned() == ACHUNK_ALIGN) {
    cached_ = chunk;
    return;
  }
  ta_.free_chunk(chunk);
}

}  // namespace achunk
