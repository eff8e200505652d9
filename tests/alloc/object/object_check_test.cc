// The checks every free makes on an object header and its tail canary, and the reports
// they make, on hand-built headers.
#include "alloc/object/object_check.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "alloc/object/label.h"
#include "support/error_recorder.h"

namespace achunk {
namespace {

using Reports = testing::ErrorRecorder;

class ObjectCheckTest : public testing::ErrorRecorderTest {
 protected:
  // An object of `size` bytes in `mem_`, with a header of `state` and an intact tail.
  void* object(ObjectState state, int64_t size) {
    void* p = &mem_[1];
    store_header(p, make_header(state, label_id("t_check"), static_cast<uint32_t>(size)));
    write_tail(p, size);
    return p;
  }
  alignas(16) uint64_t mem_[16] = {};
};

TEST_F(ObjectCheckTest, LiveHeaderAcceptsInUseAndBigOnlyWhenAsked) {
  void* p = object(ObjectState::IN_USE, 40);
  EXPECT_EQ(live_header(p, false), load_header(p));
  EXPECT_EQ(live_header(p, true), load_header(p));
  p = object(ObjectState::BIG, 40);
  EXPECT_EQ(live_header(p, true), load_header(p));
  p = object(ObjectState::ALIGNED, 40);
  EXPECT_EQ(live_header(p, true), load_header(p));
  EXPECT_EQ(Reports::calls, 0);
  EXPECT_EQ(live_header(p, false), 0u);
  EXPECT_EQ(Reports::calls, 1);
  EXPECT_EQ(Reports::kind, ErrorKind::INVALID_FREE);
}

TEST_F(ObjectCheckTest, FreeHeaderIsADoubleFreeNamingSizeAndLabel) {
  void* p = object(ObjectState::FREE, 40);
  EXPECT_EQ(live_header(p, true), 0u);
  EXPECT_EQ(Reports::calls, 1);
  EXPECT_EQ(Reports::kind, ErrorKind::DOUBLE_FREE);
  EXPECT_EQ(Reports::ptr, p);
  EXPECT_NE(Reports::line.find(": object is already free (size=40 label=t_check)"),
            std::string::npos)
      << Reports::line;
}

TEST_F(ObjectCheckTest, BadMagicIsAnInvalidFree) {
  void* p = &mem_[1];
  mem_[0] = 0x1234;  // no object state in the top bits
  EXPECT_EQ(live_header(p, true), 0u);
  EXPECT_EQ(Reports::kind, ErrorKind::INVALID_FREE);
  EXPECT_NE(Reports::line.find("no object header (bad magic)"), std::string::npos) << Reports::line;
}

TEST_F(ObjectCheckTest, OverwrittenTailIsReportedAsCorruption) {
  void* p = object(ObjectState::IN_USE, 24);
  EXPECT_TRUE(check_tail(p, load_header(p), 24, "tail overwritten"));
  EXPECT_EQ(Reports::calls, 0);
  static_cast<char*>(p)[24] ^= 1;  // one byte past the object
  EXPECT_FALSE(check_tail(p, load_header(p), 24, "tail overwritten"));
  EXPECT_EQ(Reports::calls, 1);
  EXPECT_EQ(Reports::kind, ErrorKind::CORRUPTION);
  EXPECT_NE(Reports::line.find("tail overwritten (size=24 label=t_check)"), std::string::npos)
      << Reports::line;
}

}  // namespace
}  // namespace achunk
