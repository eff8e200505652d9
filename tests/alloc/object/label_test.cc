// The label table: interning, ids shared by equal text, truncation of long labels, the
// per-thread cache, and the overflow label once the table is full.
#include "alloc/object/label.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace achunk {
namespace {

TEST(LabelTest, TheCachedLookupSeesTextRewrittenAtTheSamePointer) {
  char label[32] = "t_cache_one";
  EXPECT_EQ(label_id_cached(label), label_id("t_cache_one"));
  EXPECT_EQ(label_id_cached(label), label_id("t_cache_one"));  // a hit
  std::strcpy(label, "t_cache_two");
  EXPECT_EQ(label_id_cached(label), label_id("t_cache_two"));
  EXPECT_EQ(label_id_cached(nullptr), label_id(nullptr));
}

TEST(LabelTest, InternsOnceAndCuts) {
  const uint16_t a = label_id("SqlExecutor");
  EXPECT_EQ(label_id("SqlExecutor"), a);
  EXPECT_STREQ(label_name(a), "SqlExecutor");
  const uint16_t long_id = label_id("AVeryLongLabelNameIndeed");
  EXPECT_STREQ(label_name(long_id), "AVeryLongLabelN");
  EXPECT_STREQ(label_name(label_id(nullptr)), "unlabeled");
}

TEST(LabelTest, SameTextGivesOneIdAndItsName) {
  char a[] = "t_label_same";
  char b[] = "t_label_same";
  const uint16_t id = label_id(a);
  EXPECT_EQ(label_id(b), id);
  EXPECT_EQ(label_id(a), id);
  EXPECT_STREQ(label_name(id), "t_label_same");
  EXPECT_NE(label_id("t_label_other"), id);
  EXPECT_STREQ(label_name(label_id("t_label_other")), "t_label_other");
}

TEST(LabelTest, NoLabelIsUnlabeled) {
  EXPECT_EQ(label_id(nullptr), label_id("unlabeled"));
  EXPECT_EQ(label_id(""), label_id("unlabeled"));
  EXPECT_STREQ(label_name(label_id(nullptr)), "unlabeled");
  EXPECT_EQ(label_id_cached(nullptr), label_id("unlabeled"));
}

TEST(LabelTest, LongLabelsAreCutToTheMaxLength) {
  const uint16_t id = label_id("t_label_long_0123456789");
  EXPECT_EQ(std::strlen(label_name(id)), static_cast<size_t>(LABEL_MAX_LEN));
  EXPECT_STREQ(label_name(id), std::string("t_label_long_0123456789", LABEL_MAX_LEN).c_str());
  // Text that differs only after the cut shares the id, and so does the cut text itself.
  EXPECT_EQ(label_id("t_label_long_01abcdef"), id);
  EXPECT_EQ(label_id(std::string("t_label_long_0123456789", LABEL_MAX_LEN).c_str()), id);
  EXPECT_NE(label_id("t_label_long_0"), id);
}

TEST(LabelTest, IdsOutsideTheTableNameInvalid) {
  EXPECT_STREQ(label_name(LABEL_CAPACITY), "invalid_label");
  EXPECT_STREQ(label_name(UINT16_MAX), "invalid_label");
}

// Filling the table is for good, so it runs in a fresh process (threadsafe death-test
// style re-executes the binary): new labels then share the overflow id, old ones keep theirs.
TEST(LabelDeathTest, FullTableGivesNewLabelsTheOverflowId) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const uint16_t first = label_id("t_full_first");
        char name[32];
        int n = 0;
        uint16_t id = 0;
        while (n < 2 * LABEL_CAPACITY && id != LABEL_CAPACITY - 1) {
          std::snprintf(name, sizeof(name), "t_full_%d", n++);
          id = label_id(name);
        }
        bool ok = id == LABEL_CAPACITY - 1 && n < LABEL_CAPACITY;
        ok = ok && std::strcmp(label_name(id), "label_overflow") == 0;
        ok = ok && label_id("t_full_new_one") == LABEL_CAPACITY - 1;
        ok = ok && label_id("t_full_first") == first;
        ok = ok && std::strcmp(label_name(first), "t_full_first") == 0;
        ok = ok && std::strcmp(label_name(label_id("t_full_0")), "t_full_0") == 0;
        std::exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "");
}

}  // namespace
}  // namespace achunk
