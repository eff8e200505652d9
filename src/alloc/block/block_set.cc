#include "alloc/block/block_set.h"

#include "achunk/chunk/chunk_registry.h"
#include "alloc/block/span_bits.h"

#include <atomic>
#include <cstdint>
#include <cstring>
#include <new>

namespace achunk {

using span_bits::clear_bit;
using span_bits::highest_at_or_below;
using span_bits::lowest_at_or_above;
using span_bits::set_bit;

BlockSet::~BlockSet() {
  while (chunks_ != nullptr) release_chunk(chunks_);
}

int64_t BlockSet::span_bytes(const ABlock* block) {
  if (block->dedicated()) return AChunk::ptr2chunk(block)->alloc_bytes_;
  return block->nblocks_ * ABLOCK_SIZE;
}

int64_t BlockSet::wash_free_spans() {
  return wash_spans_freed_by(INT64_MAX) + trim_idle_slack(INT64_MAX);
}

int64_t BlockSet::wash_stale_spans(int64_t min_free_us) {
  const int64_t cutoff = source_.now_us() - min_free_us;
  return wash_spans_freed_by(cutoff) + trim_idle_slack(cutoff);
}

int64_t BlockSet::wash_stale_spans_if_due(int64_t now_us) {
  const int64_t idle = source_.span_idle_us();
  if (idle < 0 || now_us < next_look_us_) return 0;
  const int64_t cutoff = now_us - idle;
  bool failed = false;
  const int64_t washed =
      wash_spans_freed_by(cutoff, WASH_PER_FREE, &failed) + trim_idle_slack(cutoff, WASH_PER_FREE);
  // A refusal waits, as a look without a backlog does: the OS is not asked at every free.
  next_look_us_ = !failed && stale_left(cutoff) ? now_us : now_us + idle / 4;
  return washed;
}

bool BlockSet::stale_left(int64_t cutoff_us) const {
  return (dirty_head_ != nullptr && free_span(dirty_head_)->freed_us <= cutoff_us) ||
         (slack_head_ != nullptr && slack_of(slack_head_)->since_us <= cutoff_us);
}

int64_t BlockSet::wash_spans_freed_by(int64_t cutoff_us, int64_t max_spans, bool* failed) {
  int64_t washed = 0;
  ABlock* block = dirty_head_;
  for (int64_t n = 0; block != nullptr && n < max_spans; ++n) {
    ++wash_visits_;
    FreeSpan* state = free_span(block);
    if (state->freed_us > cutoff_us) break;
    ABlock* next = state->dirty_next;
    const int64_t bytes = block->nblocks_ * ABLOCK_SIZE;
    if (source_.release_pages(block_data(block), bytes) != 0) {  // try again next time
      if (failed != nullptr) *failed = true;
      break;
    }
    // A washed span stays clean while free: nobody touches a free span's pages.
    unlink_dirty(block);
    state->washed = true;
    washed += bytes;
    block = next;
  }
  return washed;
}

int BlockSet::take_stale_spans(int64_t cutoff_us, ABlock** out, int max) {
  int taken = 0;
  while (dirty_head_ != nullptr && taken < max) {
    ++wash_visits_;
    ABlock* block = dirty_head_;
    if (free_span(block)->freed_us > cutoff_us) break;
    remove_free(block);
    block->magic_ = ABlock::MAGIC_CODE | ABlock::FLAG_IN_USE;
    ++chunk_meta(AChunk::ptr2chunk(block))->using_cnt_;  // keeps the chunk held
    out[taken++] = block;
  }
  return taken;
}

void BlockSet::put_back_span(ABlock* block, bool washed) {
  // Back as a free: it merges with its neighbours (clean only if they are too).
  AChunk* chunk = AChunk::ptr2chunk(block);
  BlockChunkMeta* meta = chunk_meta(chunk);
  if (--meta->using_cnt_ == 0) {
    release_chunk(chunk);
    return;
  }
  insert_merged(block, washed ? 0 : source_.now_us(), washed);
}

void BlockSet::insert_merged(ABlock* block, int64_t freed_us, bool washed) {
  AChunk* chunk = AChunk::ptr2chunk(block);
  BlockChunkMeta* meta = chunk_meta(chunk);
  const int idx = block_index(block);
  const int next_idx = idx + block->nblocks_;
  if (next_idx < MAX_SPAN && !chunk_block(chunk, next_idx)->in_use()) {
    ABlock* next = chunk_block(chunk, next_idx);
    merge_state(&freed_us, &washed, *free_span(next));
    remove_free(next);
    block->nblocks_ += next->nblocks_;
    next->magic_ = 0;
    clear_bit(meta->span_bits_, next_idx);
  }
  block->magic_ = ABlock::MAGIC_CODE;
  if (idx > 0) {
    ABlock* prev = chunk_block(chunk, highest_at_or_below(meta->span_bits_, idx - 1));
    if (!prev->in_use()) {
      merge_state(&freed_us, &washed, *free_span(prev));
      remove_free(prev);
      prev->nblocks_ += block->nblocks_;
      block->magic_ = 0;
      clear_bit(meta->span_bits_, idx);
      block = prev;
    }
  }
  FreeSpan* state = free_span(block);
  state->freed_us = freed_us;
  state->washed = washed;
  insert_free(block);
}

int64_t BlockSet::free_span_bytes(int64_t* washed) const {
  int64_t bytes = 0;
  for_each_free_span([&](ABlock* block, int64_t n_bytes) {
    bytes += n_bytes;
    if (free_span(block)->washed) *washed += n_bytes;
  });
  return bytes;
}

void BlockSet::link_chunk(AChunk* chunk) {
  chunk->prev_ = nullptr;
  chunk->next_ = chunks_;
  if (chunks_ != nullptr) chunks_->prev_ = chunk;
  chunks_ = chunk;
  hold_ += chunk->hold();
  ++chunk_cnt_;
}

void BlockSet::unlink_chunk(AChunk* chunk) {
  if (chunk->prev_ != nullptr) {
    chunk->prev_->next_ = chunk->next_;
  } else {
    chunks_ = chunk->next_;
  }
  if (chunk->next_ != nullptr) chunk->next_->prev_ = chunk->prev_;
  chunk->prev_ = chunk->next_ = nullptr;
  hold_ -= chunk->hold();
  --chunk_cnt_;
  ++chunk_unlinks_;
}

void BlockSet::release_chunk(AChunk* chunk) {
  unlink_chunk(chunk);
  // Take the chunk's free spans off the lists before it leaves.
  BlockChunkMeta* meta = chunk_meta(chunk);
  for (int w = 0; w < 4; ++w) {
    for (uint64_t bits = meta->span_bits_[w]; bits != 0; bits &= bits - 1) {
      ABlock* block = chunk_block(chunk, w * 64 + __builtin_ctzll(bits));
      if (!block->in_use() && !block->dedicated()) remove_free(block);
      block->magic_ = 0;  // stale headers must not validate after reuse of the chunk
    }
  }
  meta->owner_ = nullptr;
  source_.free_chunk(chunk);
}

void BlockSet::insert_free(ABlock* block) {
  const int n = block->nblocks_;
  block->magic_ = ABlock::MAGIC_CODE;
  block->prev_ = nullptr;
  block->next_ = free_lists_[n];
  if (free_lists_[n] != nullptr) free_lists_[n]->prev_ = block;
  free_lists_[n] = block;
  set_bit(avail_bits_, n);
  if (!free_span(block)->washed) link_dirty(block);
}

void BlockSet::remove_free(ABlock* block) {
  const int n = block->nblocks_;
  if (block->prev_ != nullptr) {
    block->prev_->next_ = block->next_;
  } else {
    free_lists_[n] = block->next_;
  }
  if (block->next_ != nullptr) block->next_->prev_ = block->prev_;
  block->prev_ = block->next_ = nullptr;
  if (free_lists_[n] == nullptr) clear_bit(avail_bits_, n);
  if (!free_span(block)->washed) unlink_dirty(block);
}

bool BlockSet::dirty_list_consistent() const {
  int64_t dirty = 0;
  for_each_free_span([&](ABlock* block, int64_t) { dirty += free_span(block)->washed ? 0 : 1; });
  int64_t listed = 0;
  const ABlock* prev = nullptr;
  for (ABlock* block = dirty_head_; block != nullptr; block = free_span(block)->dirty_next) {
    const FreeSpan* state = free_span(block);
    if (block->in_use() || state->washed || state->dirty_prev != prev || ++listed > dirty) {
      return false;
    }
    prev = block;
  }
  return listed == dirty && dirty_tail_ == prev;
}

void BlockSet::link_dirty(ABlock* block) {
  FreeSpan* state = free_span(block);
  state->dirty_prev = dirty_tail_;
  state->dirty_next = nullptr;
  if (dirty_tail_ != nullptr) {
    free_span(dirty_tail_)->dirty_next = block;
  } else {
    dirty_head_ = block;
  }
  dirty_tail_ = block;
}

void BlockSet::unlink_dirty(ABlock* block) {
  FreeSpan* state = free_span(block);
  if (state->dirty_prev != nullptr) {
    free_span(state->dirty_prev)->dirty_next = state->dirty_next;
  } else {
    dirty_head_ = state->dirty_next;
  }
  if (state->dirty_next != nullptr) {
    free_span(state->dirty_next)->dirty_prev = state->dirty_prev;
  } else {
    dirty_tail_ = state->dirty_prev;
  }
  state->dirty_prev = state->dirty_next = nullptr;
}

int BlockSet::find_free(int nblocks) const {
  return lowest_at_or_above(avail_bits_, nblocks);
}

ABlock* BlockSet::take_chunk(AChunk* chunk) {
  // A chunk may come back from the cache with stale headers: only these are trusted.
  BlockChunkMeta* meta = new (chunk_meta(chunk)) BlockChunkMeta();
  meta->owner_ = this;
  meta->context_ = context_;
  meta->kind_ = kind_;
  // The free fast path's test of the kind, in the registry byte it reads anyway.
  if (kind_ == OWNER_OBJECT_SET) chunk_registry::mark(chunk);
  // A fresh mapping reads zero already, and its tags' page stays untouched.
  if (!chunk->fresh_) std::memset(chunk_block_tags(chunk), 0, BLOCKS_PER_CHUNK);
  set_bit(meta->span_bits_, 0);
  link_chunk(chunk);
  return new (chunk_block(chunk, 0)) ABlock();
}

ABlock* BlockSet::span_by_bits(AChunk* chunk, int at) {
  const int last = at < BLOCKS_PER_CHUNK ? at : BLOCKS_PER_CHUNK - 1;
  const int head = highest_at_or_below(chunk_meta(chunk)->span_bits_, last);
  if (head < 0) return nullptr;
  ABlock* block = chunk_block(chunk, head);
  if (!block->is_valid() || (!block->dedicated() && head + block->nblocks_ <= at)) return nullptr;
  return block;
}

void BlockSet::mark_inner(ABlock* head, const void* ptr) {
  AChunk* chunk = AChunk::ptr2chunk(head);
  const int64_t at =
      (static_cast<const char*>(ptr) - static_cast<char*>(chunk->data())) / ABLOCK_SIZE;
  const int idx = block_index(head);
  const int last = at < BLOCKS_PER_CHUNK ? static_cast<int>(at) : BLOCKS_PER_CHUNK - 1;
  if (last > idx) chunk_block(chunk, last)->nblocks_ = idx - last;
}

ABlock* BlockSet::start_span(AChunk* chunk, int idx, int nblocks) {
  ABlock* block = new (chunk_block(chunk, idx)) ABlock();
  block->nblocks_ = nblocks;
  set_bit(chunk_meta(chunk)->span_bits_, idx);
  return block;
}

bool BlockSet::add_chunk() {
  AChunk* chunk = source_.alloc_chunk(ACHUNK_SIZE, 0);
  if (chunk == nullptr) return false;
  ABlock* block = take_chunk(chunk);
  block->nblocks_ = MAX_SPAN;
  // A fresh mapping counts as washed: nothing to give back, and calloc need not zero it.
  *free_span(block) = FreeSpan{source_.now_us(), chunk->fresh_};
  insert_free(block);
  return true;
}

ABlock* BlockSet::alloc_dedicated(int64_t bytes, bool* zeroed, int64_t head_align, Lookup lookup) {
  AChunk* chunk = source_.alloc_chunk(bytes, head_align);
  if (chunk == nullptr) return nullptr;
  if (zeroed != nullptr) *zeroed = chunk->fresh_;
  ABlock* block = take_chunk(chunk);
  chunk_meta(chunk)->using_cnt_ = 1;
  *slack_of(chunk) = Slack{nullptr, nullptr, 0, false};
  block->magic_ = ABlock::MAGIC_CODE | ABlock::FLAG_IN_USE | ABlock::FLAG_DEDICATED;
  if (lookup == Lookup::EVERY_BLOCK) {
    for (int i = 1; i < MAX_SPAN; ++i) chunk_block(chunk, i)->nblocks_ = -i;
  }
  used_ += chunk->hold();
  return block;
}

// flatten: the list and split helpers inline into the two calls every context page
// and big object takes (the helpers stay out of line for the resize paths).
__attribute__((flatten)) ABlock* BlockSet::alloc_block(int64_t bytes, bool* zeroed, Lookup lookup) {
  if (bytes <= 0 || bytes > ACHUNK_MAX_ALLOC_SIZE) return nullptr;
  const int64_t n64 = (bytes + ABLOCK_SIZE - 1) / ABLOCK_SIZE;
  if (n64 > MAX_SPAN) return alloc_dedicated(bytes, zeroed, 0, lookup);
  const int n = static_cast<int>(n64);
  ABlock* block = take_free(n);
  if (block == nullptr) return nullptr;
  if (zeroed != nullptr) *zeroed = free_span(block)->washed;
  return use_span(block, n, lookup);
}

ABlock* BlockSet::take_free(int nblocks) {
  int k = find_free(nblocks);
  if (k < 0) {
    if (!add_chunk()) return nullptr;
    k = MAX_SPAN;
  }
  ABlock* block = free_lists_[k];
  remove_free(block);
  return block;
}

ABlock* BlockSet::alloc_block_aligned(int64_t bytes, int64_t align, int64_t skew, bool* zeroed,
                                      Lookup lookup) {
  const int n = blocks_for_aligned(bytes, align);
  if (n <= 0) return nullptr;
  ABlock* block = take_free(n + static_cast<int>(align / ABLOCK_SIZE) - 1);
  if (block == nullptr) return nullptr;
  const int k = block->nblocks_;
  if (zeroed != nullptr) *zeroed = free_span(block)->washed;
  const uintptr_t at = reinterpret_cast<uintptr_t>(block_data(block)) + skew;
  const auto mask = static_cast<uintptr_t>(align) - 1;
  const int lead = static_cast<int>((((at + mask) & ~mask) - at) / ABLOCK_SIZE);
  if (lead > 0) {
    // The blocks before the aligned place stay free, as clean as they were; the span
    // taken was a whole free span, so no free neighbour to merge with.
    AChunk* chunk = AChunk::ptr2chunk(block);
    ABlock* head = start_span(chunk, block_index(block) + lead, k - lead);
    block->nblocks_ = lead;
    copy_state(head, block);
    insert_free(block);
    block = head;
  }
  return use_span(block, n, lookup);
}

int BlockSet::blocks_for_aligned(int64_t bytes, int64_t align) {
  if (bytes <= 0 || align < ABLOCK_SIZE || align >= ACHUNK_ALIGN || (align & (align - 1)) != 0) {
    return 0;
  }
  const int64_t n = (bytes + ABLOCK_SIZE - 1) / ABLOCK_SIZE;
  return n + align / ABLOCK_SIZE - 1 <= MAX_SPAN ? static_cast<int>(n) : 0;
}

ABlock* BlockSet::use_span(ABlock* block, int n, Lookup lookup) {
  const int k = block->nblocks_;
  AChunk* chunk = AChunk::ptr2chunk(block);
  BlockChunkMeta* meta = chunk_meta(chunk);
  if (k > n) {
    // Split: the tail becomes a free span of its own.
    ABlock* rest = start_span(chunk, block_index(block) + n, k - n);
    copy_state(rest, block);  // the tail's pages are as clean as they were
    insert_free(rest);
  }
  block->nblocks_ = n;
  block->magic_ = ABlock::MAGIC_CODE | ABlock::FLAG_IN_USE;
  if (lookup == Lookup::EVERY_BLOCK) {
    for (int i = 1; i < n; ++i) block[i].nblocks_ = -i;  // see ptr2block
  }
  ++meta->using_cnt_;
  used_ += n * ABLOCK_SIZE;
  return block;
}

__attribute__((flatten)) void BlockSet::free_block(ABlock* block) {
  AChunk* chunk = AChunk::ptr2chunk(block);
  BlockChunkMeta* meta = chunk_meta(chunk);
  if (block->dedicated()) {
    used_ -= chunk->hold();
    if (slack_of(chunk)->linked) unlink_slack(chunk);
    release_chunk(chunk);
    wash_stale_spans_if_due(source_.now_us());
    return;
  }
  used_ -= block->nblocks_ * ABLOCK_SIZE;
  if (--meta->using_cnt_ == 0) {
    // The last span: the whole chunk goes back at once. The span is still marked in use,
    // which tells release_chunk it is on no free list.
    release_chunk(chunk);
    wash_stale_spans_if_due(source_.now_us());
    return;
  }
  // The look comes before the merge: a span that sat free for a whole idle time is washed
  // even when this free is about to join it (the merged span's clock starts again).
  const int64_t now = source_.now_us();
  wash_stale_spans_if_due(now);
  // Some of its pages are dirty now: the whole span waits a full idle time again.
  insert_merged(block, now, false);
}

}  // namespace achunk
