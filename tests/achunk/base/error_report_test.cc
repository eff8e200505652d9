// Error reports: the line a handler receives (kind, pointer in hex, detail), handler
// installation, and the default handler, which writes the line and aborts.
#include "achunk/base/error_report.h"

#include <gtest/gtest.h>

#include <string>

#include "support/error_recorder.h"

namespace achunk {
namespace {

using ErrorReportTest = testing::ErrorRecorderTest;
using Seen = testing::ErrorRecorder;

TEST_F(ErrorReportTest, HandlerReceivesKindPointerAndLine) {
  const void* p = reinterpret_cast<const void*>(uintptr_t{0x7f12345678a0});
  report_error(ErrorKind::DOUBLE_FREE, p, "object is already free");
  EXPECT_EQ(Seen::calls, 1);
  EXPECT_EQ(Seen::kind, ErrorKind::DOUBLE_FREE);
  EXPECT_EQ(Seen::ptr, p);
  EXPECT_EQ(Seen::line, "achunk: double free of 0x00007f12345678a0: object is already free");
  report_error(ErrorKind::INVALID_FREE, nullptr, "x");
  EXPECT_EQ(Seen::line, "achunk: invalid free of 0x0000000000000000: x");
  report_error(ErrorKind::CORRUPTION, p, "tail overwritten");
  EXPECT_EQ(Seen::kind, ErrorKind::CORRUPTION);
  EXPECT_EQ(Seen::line, "achunk: heap corruption of 0x00007f12345678a0: tail overwritten");
  EXPECT_EQ(Seen::calls, 3);
}

TEST_F(ErrorReportTest, SetReturnsThePreviousHandlerAndNullRestoresTheDefault) {
  EXPECT_EQ(set_error_handler(&Seen::handler), &Seen::handler);
  const ErrorHandler def = set_error_handler(nullptr);
  EXPECT_EQ(def, &Seen::handler);
  const ErrorHandler restored = set_error_handler(&Seen::handler);
  EXPECT_NE(restored, nullptr);
  EXPECT_NE(restored, &Seen::handler);  // the default one
}

TEST(ErrorReportDeathTest, DefaultHandlerWritesTheLineAndAborts) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_DEATH(
      {
        set_error_handler(nullptr);
        report_error(ErrorKind::INVALID_FREE, reinterpret_cast<void*>(uintptr_t{0x1000}),
                     "not a chunk");
      },
      "achunk: invalid free of 0x0000000000001000: not a chunk\n");
}

// Cut at 510 bytes, the newline kept: the next line starts on a line of its own.
TEST(ErrorReportDeathTest, LongStderrLinesAreCut) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        const std::string line(600, 'x');
        write_stderr_line(line.c_str());
        std::exit(0);
      },
      ::testing::ExitedWithCode(0), "^x{510}\n$");
}

}  // namespace
}  // namespace achunk
