// Block layer: the 8 KiB block and its header. A chunk's 24 KiB header region holds the
// AChunk, the block-layer chunk meta (owner, span count, span-start bits), one 64 B
// ABlock per block, so a pointer finds its chunk by masking and its block by index, and
// a tag byte per block for the spans' owner.
// Depends on the chunk layer (achunk_header.h).
#pragma once

#include <cstdint>

#include "achunk/chunk/achunk_header.h"

namespace achunk {

inline constexpr int64_t ABLOCK_SIZE = int64_t{8} << 10;
inline constexpr int BLOCKS_PER_CHUNK = static_cast<int>(ACHUNK_SIZE / ABLOCK_SIZE);  // 253

class BlockSet;

struct ABlock {
  static constexpr uint32_t MAGIC_CODE = 0xCCEEDD00;
  static constexpr uint32_t FLAG_IN_USE = 1;
  static constexpr uint32_t FLAG_DEDICATED = 2;  // the span is a whole chunk of its own

  bool is_valid() const { return (magic_ & ~0xFFu) == MAGIC_CODE; }
  bool in_use() const { return (magic_ & FLAG_IN_USE) != 0; }
  bool dedicated() const { return (magic_ & FLAG_DEDICATED) != 0; }

  uint32_t magic_ = MAGIC_CODE;
  // A span head: the span length (0 for a dedicated chunk). Any other block of an in-use
  // span: minus its distance to the head.
  int32_t nblocks_ = 0;
  ABlock* prev_ = nullptr;  // free-span list (BlockSet) or the owner's lists (object layer)
  ABlock* next_ = nullptr;
  // Room for the layer that owns the span (the object layer keeps its slab state here).
  alignas(8) unsigned char owner_area_[40];
};
static_assert(sizeof(ABlock) == 64);

// Block-layer state of a chunk, right after the AChunk in the header region.
struct BlockChunkMeta {
  BlockSet* owner_ = nullptr;
  void* context_ = nullptr;     // the owner's owner (the ObjectSet), for frees by pointer
  int32_t using_cnt_ = 0;       // spans in use
  int32_t kind_ = 0;            // which kind of owner context_ is (BlockSet's `kind`)
  uint64_t span_bits_[4] = {};  // bit i set: a span (free or used) starts at block i
  uint64_t scan_mark_ = 0;      // the usage scan that last visited it (ObjectMgr)
};

inline constexpr int64_t BLOCK_META_OFFSET = 64;
inline constexpr int64_t ABLOCK_ARRAY_OFFSET = 128;
static_assert(sizeof(AChunk) <= BLOCK_META_OFFSET);
static_assert(BLOCK_META_OFFSET + sizeof(BlockChunkMeta) <= ABLOCK_ARRAY_OFFSET);
// The tags: a byte per block that the layer owning the spans writes, every one 0 when
// the block layer takes the chunk (BlockSet::take_chunk). The object layer keeps there
// the class of each block of a slab (see slab_tag), so a free learns it in one load of a
// line shared by 64 blocks, no block's ABlock line.
inline constexpr int64_t BLOCK_TAGS_OFFSET = 16384;
static_assert(ABLOCK_ARRAY_OFFSET + BLOCKS_PER_CHUNK * sizeof(ABlock) <= BLOCK_TAGS_OFFSET);
static_assert(BLOCK_TAGS_OFFSET + BLOCKS_PER_CHUNK <= ACHUNK_HEADER_SIZE);

inline BlockChunkMeta* chunk_meta(AChunk* chunk) {
  return reinterpret_cast<BlockChunkMeta*>(reinterpret_cast<char*>(chunk) + BLOCK_META_OFFSET);
}
inline ABlock* chunk_block(AChunk* chunk, int idx) {
  return reinterpret_cast<ABlock*>(reinterpret_cast<char*>(chunk) + ABLOCK_ARRAY_OFFSET) + idx;
}
inline uint8_t* chunk_block_tags(AChunk* chunk) {
  return reinterpret_cast<uint8_t*>(chunk) + BLOCK_TAGS_OFFSET;
}
inline int block_index(const ABlock* block) {
  const AChunk* chunk = AChunk::ptr2chunk(block);
  return static_cast<int>((reinterpret_cast<const char*>(block) -
                           reinterpret_cast<const char*>(chunk) - ABLOCK_ARRAY_OFFSET) /
                          static_cast<int64_t>(sizeof(ABlock)));
}
inline void* block_data(ABlock* block) {
  AChunk* chunk = AChunk::ptr2chunk(block);
  return static_cast<char*>(chunk->data()) + block_index(block) * ABLOCK_SIZE;
}

}  // namespace achunk
