// BlockSet's resizing of a span in use, for a big object's realloc: forward into the free
// span after it, backward into the free span before it, and trimming its tail. Each is
// O(blocks of the span) for the distances it writes, plus O(1) list work. A dedicated
// chunk is resized by its source instead (a syscall, O(1) in this set); the tail a
// shrink keeps waits on the slack list for its idle time.
#include <cstdint>
#include <cstring>

#include "alloc/block/block_set.h"
#include "alloc/block/span_bits.h"

namespace achunk {

using span_bits::clear_bit;
using span_bits::highest_at_or_below;

namespace {

int blocks_for(int64_t bytes) {
  return static_cast<int>((bytes + ABLOCK_SIZE - 1) / ABLOCK_SIZE);
}

}  // namespace

bool BlockSet::grow_block(ABlock* block, int64_t bytes) {
  if (block->dedicated() || bytes > MAX_SPAN * ABLOCK_SIZE) return false;
  const int want = blocks_for(bytes);
  const int n = block->nblocks_;
  if (want <= n) return true;
  const int next_idx = block_index(block) + n;
  if (next_idx >= MAX_SPAN) return false;
  AChunk* chunk = AChunk::ptr2chunk(block);
  ABlock* next = chunk_block(chunk, next_idx);
  const int extra = want - n;
  if (next->in_use() || next->nblocks_ < extra) return false;
  BlockChunkMeta* meta = chunk_meta(chunk);
  remove_free(next);
  const int rest = next->nblocks_ - extra;
  next->magic_ = 0;
  clear_bit(meta->span_bits_, next_idx);
  if (rest > 0) {
    // The free span's tail stays free, as clean as it was.
    ABlock* tail = start_span(chunk, next_idx + extra, rest);
    copy_state(tail, next);
    insert_free(tail);
  }
  for (int i = n; i < want; ++i) block[i].nblocks_ = -i;  // see ptr2block
  block->nblocks_ = want;
  used_ += extra * ABLOCK_SIZE;
  return true;
}

ABlock* BlockSet::grow_block_back(ABlock* block, int64_t bytes) {
  if (block->dedicated() || bytes > MAX_SPAN * ABLOCK_SIZE) return nullptr;
  const int want = blocks_for(bytes);
  const int idx = block_index(block);
  const int n = block->nblocks_;
  if (idx == 0 || want <= n) return nullptr;
  AChunk* chunk = AChunk::ptr2chunk(block);
  BlockChunkMeta* meta = chunk_meta(chunk);
  ABlock* prev = chunk_block(chunk, highest_at_or_below(meta->span_bits_, idx - 1));
  if (prev->in_use()) return nullptr;
  const int m = prev->nblocks_;
  const int next_idx = idx + n;
  const int ahead = next_idx < MAX_SPAN && !chunk_block(chunk, next_idx)->in_use()
                        ? chunk_block(chunk, next_idx)->nblocks_
                        : 0;
  if (m + n + ahead < want) return nullptr;
  remove_free(prev);
  // The free span's head becomes the span's: it takes the owner's state, the old head
  // becomes an inner block.
  std::memcpy(prev->owner_area_, block->owner_area_, sizeof(block->owner_area_));
  for (int i = 1; i < m + n; ++i) prev[i].nblocks_ = -i;  // see ptr2block
  prev->nblocks_ = m + n;
  prev->magic_ = ABlock::MAGIC_CODE | ABlock::FLAG_IN_USE;
  block->magic_ = 0;
  clear_bit(meta->span_bits_, idx);
  used_ += m * ABLOCK_SIZE;
  if (m + n < want) grow_block(prev, bytes);  // checked above: the span after has room
  return prev;
}

void BlockSet::shrink_block(ABlock* block, int64_t bytes) {
  const int keep = blocks_for(bytes > ABLOCK_SIZE ? bytes : ABLOCK_SIZE);
  const int n = block->nblocks_;
  if (block->dedicated() || keep >= n) return;
  AChunk* chunk = AChunk::ptr2chunk(block);
  const int tail_idx = block_index(block) + keep;
  block->nblocks_ = keep;
  used_ -= (n - keep) * ABLOCK_SIZE;
  ABlock* tail = start_span(chunk, tail_idx, n - keep);
  // As free_block: the look first, then the tail waits a whole idle time (it was in use).
  const int64_t now = source_.now_us();
  wash_stale_spans_if_due(now);
  insert_merged(tail, now, false);
}

ABlock* BlockSet::resize_dedicated(ABlock* block, int64_t bytes) {
  if (!block->dedicated()) return nullptr;
  AChunk* chunk = AChunk::ptr2chunk(block);
  const int64_t old_hold = chunk->hold();
  // Off the lists while its header may move: the neighbours' links would name the old place.
  const bool had_slack = slack_of(chunk)->linked;
  if (had_slack) unlink_slack(chunk);
  unlink_chunk(chunk);
  AChunk* resized = source_.resize_chunk(chunk, bytes);
  const int64_t now = source_.now_us();
  if (resized == nullptr) {
    link_chunk(chunk);
    if (had_slack) link_slack(chunk, now);
    return nullptr;
  }
  link_chunk(resized);
  used_ += resized->hold() - old_hold;
  // Every resize restarts the tail's idle time: a buffer shrunk and grown each request
  // keeps its pages while the requests come. A chunk that shrank stays listed until
  // trimmed, grown back or not: its last unit may hold pages past the request.
  if (resized->has_tail()) link_slack(resized, now);
  wash_stale_spans_if_due(now);
  return chunk_block(resized, 0);
}

void BlockSet::link_slack(AChunk* chunk, int64_t now_us) {
  Slack* s = slack_of(chunk);
  *s = Slack{slack_tail_, nullptr, now_us, true};
  if (slack_tail_ != nullptr) {
    slack_of(slack_tail_)->next = chunk;
  } else {
    slack_head_ = chunk;
  }
  slack_tail_ = chunk;
  ++slack_cnt_;
}

void BlockSet::unlink_slack(AChunk* chunk) {
  Slack* s = slack_of(chunk);
  if (s->prev != nullptr) {
    slack_of(s->prev)->next = s->next;
  } else {
    slack_head_ = s->next;
  }
  if (s->next != nullptr) {
    slack_of(s->next)->prev = s->prev;
  } else {
    slack_tail_ = s->prev;
  }
  *s = Slack{nullptr, nullptr, 0, false};
  --slack_cnt_;
}

int64_t BlockSet::trim_idle_slack(int64_t cutoff_us, int64_t max_tails) {
  int64_t trimmed = 0;
  for (int64_t n = 0;
       n < max_tails && slack_head_ != nullptr && slack_of(slack_head_)->since_us <= cutoff_us;
       ++n) {
    AChunk* chunk = slack_head_;
    unlink_slack(chunk);
    // In place (a mapping's shrink never moves), and the request's hold is unchanged.
    const int64_t bytes = source_.trim_chunk(chunk);
    if (bytes < 0) {
      link_slack(chunk, source_.now_us());  // the OS refused: a whole idle time again
      break;
    }
    trimmed += bytes;
  }
  return trimmed;
}

}  // namespace achunk
