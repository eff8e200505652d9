// ObjectSet::zero_big over the fake OS: calloc's zeroing of a big object on dirty pages
// writes the pieces mostly in RAM and gives back the ones mostly out of it.
#include <gtest/gtest.h>

#include <cstring>

#include "alloc/object/label.h"
#include "alloc/object/object_set.h"
#include "support/chunk_mgr_fixture.h"

namespace achunk::testing {
namespace {

class ZeroBigTest : public ChunkMgrTest {
 protected:
  // A big object of `size` on the pages a freed one of the same size dirtied.
  char* dirty_big(ObjectSet& set, int64_t size) {
    void* first = set.alloc(size, label_id("t_zero_big"));
    std::memset(first, 0x5a, static_cast<size_t>(size));
    ObjectSet::free(first);
    char* p = static_cast<char*>(set.alloc(size, label_id("t_zero_big")));
    EXPECT_EQ(p, first);
    EXPECT_FALSE(ObjectSet::born_zero(p));
    return p;
  }
  static void expect_zero(const char* p, int64_t size) {
    for (int64_t i = 0; i < size; ++i) ASSERT_EQ(p[i], 0) << i;
  }
  DirectChunkSource source_{mgr_};
};

// Every page in RAM, or one in four (a buffer reused while hot, a caller that fills a
// quarter of it): written in place, none given back.
TEST_F(ZeroBigTest, APieceInRamIsWrittenNotGivenBack) {
  source_.set_span_idle_ms(30'000);
  ObjectSet set(source_);
  for (const int64_t every : {1, 4}) {
    const int64_t size = 600 << 10;
    char* p = dirty_big(set, size);
    os_.set_resident_every(every);
    const int64_t releases = os_.release_calls();
    const int64_t probes = os_.page_probes();
    ObjectSet::zero_big(p, size);
    EXPECT_EQ(os_.release_calls(), releases) << every;
    EXPECT_EQ(os_.page_probes(), probes + 1) << every;
    expect_zero(p, size);
    os_.set_resident_every(1);
    ObjectSet::free(p);
  }
}

// One page in 16 in RAM (what a sparse user left after an earlier release): the
// whole pages go back in one release a piece, with no page written and faulted in; the
// partial pages at the ends are written.
TEST_F(ZeroBigTest, APieceMostlyOutOfRamIsGivenBack) {
  source_.set_span_idle_ms(30'000);
  ObjectSet set(source_);
  for (const int64_t size : {int64_t{100} << 10, int64_t{600} << 10}) {
    char* p = dirty_big(set, size);
    os_.set_resident_every(16);
    const int64_t releases = os_.release_calls();
    const int64_t released = os_.released_bytes();
    ObjectSet::zero_big(p, size);
    EXPECT_EQ(os_.release_calls(), releases + 1) << size;
    EXPECT_GE(os_.released_bytes() - released, size - 2 * 4096) << size;
    expect_zero(p, size);  // the fake zero-fills what it releases, as MADV_DONTNEED does
    os_.set_resident_every(1);
    ObjectSet::free(p);
  }
}

// An object past one piece is decided piece by piece, one probe each; when the OS cannot
// give pages back, they are written.
// Four pieces mostly out of RAM: one probe for all, one release for the run; a release
// the OS refuses writes the run instead.
TEST_F(ZeroBigTest, OneProbeAWindowOneReleaseARunAndAFailedReleaseWrites) {
  source_.set_span_idle_ms(30'000);
  ObjectSet set(source_);
  const int64_t size = 3 * ObjectSet::ZERO_PIECE + (100 << 10);
  char* p = dirty_big(set, size);
  os_.set_resident_every(16);
  const int64_t probes = os_.page_probes();
  const int64_t releases = os_.release_calls();
  ObjectSet::zero_big(p, size);
  EXPECT_EQ(os_.page_probes(), probes + 1);
  EXPECT_EQ(os_.release_calls(), releases + 1);
  expect_zero(p, size);
  std::memset(p, 0x5a, static_cast<size_t>(size));
  os_.set_zero_fill(false);
  os_.fail_next_releases(1);  // the run: written instead
  ObjectSet::zero_big(p, size);
  expect_zero(p, size);
  os_.set_zero_fill(true);
  ObjectSet::free(p);
}

}  // namespace
}  // namespace achunk::testing
