// Block layer: BlockSet carves chunks from a ChunkSource into spans of 8 KiB blocks.
// Best fit by span length (one free list per length plus a bitmap), spans placed for an
// alignment (best fit with room to slide, the slide split off), coalescing with free
// neighbours, a dedicated chunk for spans larger than a chunk, and a chunk whose last
// span is freed goes straight back to the source (so it enters the chunk cache and can
// idle out). Not thread-safe: its owner serialises calls. Never allocates.
// Depends on the chunk layer and ablock.h / chunk_source.h.
#pragma once

#include <cstdint>

#include "alloc/block/ablock.h"
#include "alloc/block/chunk_source.h"

namespace achunk {

class BlockSet {
 public:
  // Owners of a BlockSet, recorded in each chunk's meta with `context`, so a pointer
  // leads back to the owner without a lookup and frees can tell whose chunk it is.
  enum OwnerKind : int { OWNER_NONE = 0, OWNER_OBJECT_SET = 1, OWNER_PAGE_MANAGER = 2 };

  // What a span's non-head blocks hold. EVERY_BLOCK: minus their distance to the head,
  // so a pointer into any block finds its span in one load. HEAD_BLOCK: nothing written,
  // for owners that look up only pointers into the first block (a big object's header);
  // a pointer further in is found through the chunk's span bits (ptr2block). Taking a
  // span then costs O(1), not a store to one line per block.
  enum class Lookup : bool { HEAD_BLOCK = false, EVERY_BLOCK = true };

  explicit BlockSet(ChunkSource& source, void* context = nullptr, int kind = OWNER_NONE)
      : source_(source), context_(context), kind_(kind) {}
  // Returns every chunk still held to the source (spans still in use are the caller's leak).
  ~BlockSet();
  BlockSet(const BlockSet&) = delete;
  BlockSet& operator=(const BlockSet&) = delete;

  // A span with at least `bytes` bytes at block_data(), or nullptr (the source's reason is
  // in last_alloc_failure()). *zeroed (when given) tells whether the span's pages are
  // untouched since mapped or washed, so its bytes read as zero without a memset.
  ABlock* alloc_block(int64_t bytes, bool* zeroed = nullptr, Lookup lookup = Lookup::EVERY_BLOCK);
  // A span with at least `bytes` bytes at block_data() whose block_data() + `skew` (a
  // multiple of ABLOCK_SIZE) is a multiple of `align` (a power of two, ABLOCK_SIZE up to
  // half a chunk), or nullptr. It takes a free span with room to slide and gives the
  // blocks before and after back free, so an aligned request costs its own blocks only.
  // nullptr too when the request cannot fit a chunk with its slide (blocks_for_aligned).
  ABlock* alloc_block_aligned(int64_t bytes, int64_t align, int64_t skew, bool* zeroed = nullptr,
                              Lookup lookup = Lookup::EVERY_BLOCK);
  // The blocks alloc_block_aligned would take for the request, or 0 when it cannot place
  // it (a bad alignment, or the span and its slide larger than a chunk).
  static int blocks_for_aligned(int64_t bytes, int64_t align);
  // A span that is a chunk of its own, placed per `head_align` (AChunkMgr::alloc_chunk).
  ABlock* alloc_dedicated(int64_t bytes, bool* zeroed, int64_t head_align,
                          Lookup lookup = Lookup::EVERY_BLOCK);
  // The span joins its free neighbours and keeps its pages: spans go back to the OS by
  // idle time only (wash_stale_spans), so a loop that frees and takes the same memory
  // never pays a madvise and the faults after it.
  void free_block(ABlock* block);
  // Grows a span in use (not a dedicated chunk) in place to at least `bytes`, taking the
  // front of the free span right after it; false, and nothing changed, when that span is
  // missing or too short. Lets a big object's realloc grow without a copy.
  bool grow_block(ABlock* block, int64_t bytes);
  // Grows a span in use (not a dedicated chunk) to at least `bytes` by joining the whole
  // free span right before it, and the front of the one after it if still short: returns
  // the new head (the free span's, which takes the owner area), or nullptr with nothing
  // changed when they are missing or too short. The caller moves its bytes down (they
  // stay where they were) and may trim the span with shrink_block. Lets a big object's
  // realloc reuse the memory around it, as glibc's merges a free chunk before it.
  ABlock* grow_block_back(ABlock* block, int64_t bytes);
  // Shrinks a span in use (not a dedicated chunk) to the blocks that hold `bytes`; the
  // blocks after go back free (and merge) as a free_block would.
  void shrink_block(ABlock* block, int64_t bytes);
  // Resizes a dedicated chunk's span to `bytes` through the source (ChunkSource::
  // resize_chunk: mremap, no copy): returns the head, maybe at a new address, or nullptr
  // with nothing changed. Lets a big object's realloc beyond a chunk grow and shrink as
  // glibc's mmapped chunks do. A shrink keeps the mapping's tail until trim_idle_slack.
  ABlock* resize_dedicated(ABlock* block, int64_t bytes);
  // Unmaps the tails that dedicated chunks kept when they shrank and that no resize has
  // touched since `cutoff_us` (ChunkSource::trim_chunk), oldest first, at most
  // `max_tails`: O(trimmed + 1). Returns the bytes unmapped. The idle washes call it with
  // the span idle time.
  int64_t trim_idle_slack(int64_t cutoff_us, int64_t max_tails = INT64_MAX);
  // Dedicated chunks keeping a tail past their request.
  int64_t slack_chunks() const { return slack_cnt_; }
  // Gives the pages of a range inside a span in use back to the OS (it then reads as
  // zero); 0 or errno. Touches no state of the set, so it needs no lock.
  int release_pages(void* addr, int64_t size) { return source_.release_pages(addr, size); }
  // Which pages of a page-aligned range inside a span are in RAM (Os::resident_pages: the
  // page size, or -1); a syscall, no lock.
  int64_t resident_pages(void* addr, int64_t size, unsigned char* vec) {
    return source_.resident_pages(addr, size, vec);
  }

  // Gives the physical pages of every free span not washed yet back to the OS (madvise); the spans
  // stay free and usable, they fault in again when reused. Unmaps every kept tail
  // (trim_idle_slack) too. Returns the bytes washed and unmapped.
  int64_t wash_free_spans();
  // Washes every free span that has been free (as it is now: a merge restarts the
  // count) for at least `min_free_us` on the source's clock and was not washed since, so
  // memory freed long ago goes back while spans freed a moment ago, likely to be reused
  // soon, keep their pages. The drop-in malloc's release thread calls it every interval
  // with the span idle time. Tails kept as long are unmapped (trim_idle_slack). Returns
  // the bytes washed and unmapped.
  int64_t wash_stale_spans(int64_t min_free_us);
  // Washing without holding the owner's lock across the madvise calls: take_stale_spans
  // moves up to `max` free spans not washed and free since `cutoff_us` or before off the
  // free lists into out[] (marked in use, so nothing allocates, grows or merges into them);
  // the caller releases their pages unlocked and hands each back with put_back_span,
  // washed or not. Returns how many it took. O(taken + 1): see dirty_head_.
  int take_stale_spans(int64_t cutoff_us, ABlock** out, int max);
  // Free spans the washing paths looked at so far (a test counts them per span washed).
  uint64_t wash_visits() const { return wash_visits_; }
  // True if every free span not washed is on the dirty list once, the list is linked
  // both ways, and nothing else is on it. O(free spans): for tests.
  bool dirty_list_consistent() const;
  void put_back_span(ABlock* block, bool washed);
  // On span frees, without a thread (as the chunk layer evicts on free_chunk): washes
  // the oldest span free for a whole span idle time and unmaps the oldest tail kept as
  // long, at most one of each (WASH_PER_FREE), so no free pays for a whole backlog. While
  // a backlog is left the next free looks again; else the next look waits a quarter of
  // the idle time. Never when that is negative. Returns the bytes washed and unmapped.
  int64_t wash_stale_spans_if_due(int64_t now_us);
  static constexpr int64_t WASH_PER_FREE = 1;

  // The span head holding `ptr` (any pointer into a chunk's first 2 MiB), or nullptr when
  // no valid span header covers it. Exact for spans of either Lookup: a distance names
  // either the right head or none (a block that stops being a head loses its magic), and
  // when it names none the span bits are asked.
  static ABlock* ptr2block(const void* ptr);
  // Writes the distance to `head` (a span in use) into the block of `ptr` inside it, so
  // that ptr2block finds the span in one load: for a HEAD_BLOCK span that hands out a
  // pointer further in. Needs no lock: only the span's user writes its inner blocks.
  static void mark_inner(ABlock* head, const void* ptr);
  // The index of the span head for block `at` of a chunk, from the distance every
  // non-head block of an in-use span holds (branch-free); -1 if a stale distance points
  // before the chunk. The caller still checks that the head is in use and reaches `at`.
  static int span_head(AChunk* chunk, int at) {
    const int32_t to_head = chunk_block(chunk, at)->nblocks_;
    const int head = at + (to_head < 0 ? to_head : 0);
    return head >= 0 ? head : -1;
  }
  // Usable bytes of a span.
  static int64_t span_bytes(const ABlock* block);

  // Bytes of free spans, and in *washed those whose pages were given back and not
  // touched since (a walk of the free lists: for dumps, not for hot paths).
  int64_t free_span_bytes(int64_t* washed) const;
  int64_t hold() const { return hold_; }  // bytes of the chunks held
  int64_t now_us() { return source_.now_us(); }
  int64_t used() const { return used_; }  // bytes of spans handed out
  int64_t chunk_count() const { return chunk_cnt_; }

  // Calls f(AChunk*) for every chunk the set holds.
  template <typename F>
  void for_each_chunk(F f) const {
    for (AChunk* chunk = chunks_; chunk != nullptr; chunk = chunk->next_) f(chunk);
  }
  // The first of the set's chunks (the rest follow through AChunk::next_), or nullptr.
  AChunk* first_chunk() const { return chunks_; }
  // Chunks taken off the set's list so far: while this stays the same, a chunk seen on the
  // list is still on it, at its place.
  uint64_t chunk_unlinks() const { return chunk_unlinks_; }
  // Calls f(ABlock*, bytes) for every free span.
  template <typename F>
  void for_each_free_span(F f) const {
    for (int n = 1; n <= MAX_SPAN; ++n) {
      for (ABlock* block = free_lists_[n]; block != nullptr; block = block->next_) {
        f(block, n * ABLOCK_SIZE);
      }
    }
  }
  // Calls f(ABlock*) for every span in use, chunk by chunk (for usage scans).
  template <typename F>
  void for_each_used_span(F f) const;
  // Calls f(ABlock* head, int64_t bytes) for every span, free or in use, of one of the
  // set's chunks (for usage scans).
  template <typename F>
  static void for_each_span_of(AChunk* chunk, F f);

 private:
  static constexpr int MAX_SPAN = BLOCKS_PER_CHUNK;

  // Sets up a chunk fresh from the source as this set's; returns its block 0 header.
  ABlock* take_chunk(AChunk* chunk);
  bool add_chunk();
  void link_chunk(AChunk* chunk);
  // Takes the chunk off the set's list and hold.
  void unlink_chunk(AChunk* chunk);
  void release_chunk(AChunk* chunk);
  // A new span of `nblocks` starting at block `idx` of `chunk` (its header reset, its
  // span-start bit set); the caller files it.
  static ABlock* start_span(AChunk* chunk, int idx, int nblocks);
  // The best-fitting free span of at least `nblocks`, off the lists (a new chunk's when
  // none), or nullptr when the source fails.
  ABlock* take_free(int nblocks);
  // Marks the first n blocks of `block`, a free span just taken off the lists, in use;
  // the rest stays free, as clean as it was.
  ABlock* use_span(ABlock* block, int n, Lookup lookup);
  // ptr2block's second look, for a block whose distance names no head: the span that
  // starts at the highest span bit at or below block `at`, if valid and reaching it.
  static ABlock* span_by_bits(AChunk* chunk, int at);
  void insert_free(ABlock* block);
  void remove_free(ABlock* block);
  int find_free(int nblocks) const;
  // Washes the free spans not washed yet that became free at or before `cutoff_us`, the
  // oldest first, at most `max_spans`; *failed (if given) tells whether the OS refused one.
  int64_t wash_spans_freed_by(int64_t cutoff_us, int64_t max_spans = INT64_MAX,
                              bool* failed = nullptr);
  // Whether a span or a kept tail has waited since `cutoff_us` or before.
  bool stale_left(int64_t cutoff_us) const;
  // Free-span state, kept in the head's owner area while the span is free.
  struct FreeSpan {
    int64_t freed_us;  // when the span (as it is now) became free
    // No page holds anything: given back since, or never touched since the chunk was
    // mapped. Nothing writes to a free span's pages, so it stays true while free.
    bool washed;
    // The dirty list (a span not washed is on it while free); set by insert_free.
    ABlock* dirty_prev;
    ABlock* dirty_next;
  };
  static_assert(sizeof(FreeSpan) <= sizeof(ABlock::owner_area_));
  static FreeSpan* free_span(ABlock* block) {
    return reinterpret_cast<FreeSpan*>(block->owner_area_);
  }
  // A dedicated chunk's place on the slack list, kept in block 1's owner area: a
  // dedicated chunk's other blocks hold only their distance to block 0.
  struct Slack {
    AChunk* prev;
    AChunk* next;
    int64_t since_us;  // the resize that left the tail
    bool linked;
  };
  static_assert(sizeof(Slack) <= sizeof(ABlock::owner_area_));
  static Slack* slack_of(AChunk* chunk) {
    return reinterpret_cast<Slack*>(chunk_block(chunk, 1)->owner_area_);
  }
  void link_slack(AChunk* chunk, int64_t now_us);
  void unlink_slack(AChunk* chunk);
  void link_dirty(ABlock* block);
  void unlink_dirty(ABlock* block);
  // A split-off span's time and cleanliness, field by field (see merge_state); the dirty
  // links are insert_free's.
  static void copy_state(ABlock* to, ABlock* from) {
    free_span(to)->freed_us = free_span(from)->freed_us;
    free_span(to)->washed = free_span(from)->washed;
  }
  // Joins a free neighbour's state into (*freed_us, *washed): clean only if both are, and
  // a dirty span keeps the time it became dirty. Scalars, not a FreeSpan by value: a copy
  // of the padded struct stalls on store forwarding in every span free.
  static void merge_state(int64_t* freed_us, bool* washed, const FreeSpan& other) {
    if (*washed != other.washed) {
      if (*washed) {
        *freed_us = other.freed_us;
        *washed = false;
      }
      return;
    }
    if (other.freed_us > *freed_us) *freed_us = other.freed_us;
  }
  // A span no longer in use joins its free neighbours and the free lists, its state
  // (freed at `freed_us`, `washed` or not) merged with theirs (merge_state).
  void insert_merged(ABlock* block, int64_t freed_us, bool washed);

  ChunkSource& source_;
  void* context_;
  int kind_;
  AChunk* chunks_ = nullptr;  // every chunk this set holds, linked through AChunk prev_/next_
  ABlock* free_lists_[MAX_SPAN + 1] = {};  // index: span length in blocks
  uint64_t avail_bits_[4] = {};            // bit n: free_lists_[n] is not empty
  int64_t hold_ = 0;
  int64_t used_ = 0;
  int64_t next_look_us_ = 0;  // when wash_stale_spans_if_due looks next
  // Dedicated chunks with a kept tail, oldest resize first (see Slack).
  AChunk* slack_head_ = nullptr;
  AChunk* slack_tail_ = nullptr;
  int64_t slack_cnt_ = 0;
  int64_t chunk_cnt_ = 0;
  uint64_t chunk_unlinks_ = 0;
  // Every free span not washed, in the order it joined the free lists: the ones free the
  // longest come first, so washing looks only at spans it washes (and one more). A split
  // tail keeps its time but goes to the end: it is washed late by at most the time it
  // had already been free.
  ABlock* dirty_head_ = nullptr;
  ABlock* dirty_tail_ = nullptr;
  uint64_t wash_visits_ = 0;
};

template <typename F>
void BlockSet::for_each_used_span(F f) const {
  for (AChunk* chunk = chunks_; chunk != nullptr; chunk = chunk->next_) {
    for_each_span_of(chunk, [&](ABlock* block, int64_t) {
      if (block->in_use()) f(block);
    });
  }
}

template <typename F>
void BlockSet::for_each_span_of(AChunk* chunk, F f) {
  const BlockChunkMeta* meta = chunk_meta(chunk);
  for (int w = 0; w < 4; ++w) {
    for (uint64_t bits = meta->span_bits_[w]; bits != 0; bits &= bits - 1) {
      ABlock* block = chunk_block(chunk, w * 64 + __builtin_ctzll(bits));
      f(block, block->in_use() ? span_bytes(block) : block->nblocks_ * ABLOCK_SIZE);
    }
  }
}

// Inline: every free starts here.
inline ABlock* BlockSet::ptr2block(const void* ptr) {
  AChunk* chunk = AChunk::ptr2chunk(ptr);
  const int64_t offset = static_cast<const char*>(ptr) - static_cast<char*>(chunk->data());
  if (offset < 0) return nullptr;
  const int at = static_cast<int>(offset / ABLOCK_SIZE);
  // Past the block area only inside a dedicated chunk, whose last header names the head.
  const int last = at < BLOCKS_PER_CHUNK ? at : BLOCKS_PER_CHUNK - 1;
  const int head = span_head(chunk, last);
  ABlock* block = head >= 0 ? chunk_block(chunk, head) : nullptr;
  if (block == nullptr || !block->is_valid() ||
      (!block->dedicated() && head + block->nblocks_ <= at)) {
    return span_by_bits(chunk, at);
  }
  return block;
}

}  // namespace achunk
