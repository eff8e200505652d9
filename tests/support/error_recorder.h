// Test support: an error handler that records the last report (kind, pointer, line) and
// counts them, installed for a test's lifetime by ErrorRecorderTest. Depends on the base
// layer's error_report.h.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "achunk/base/error_report.h"

namespace achunk::testing {

struct ErrorRecorder {
  static inline int calls = 0;
  static inline ErrorKind kind = ErrorKind::INVALID_FREE;
  static inline const void* ptr = nullptr;
  static inline std::string line;
  static void handler(ErrorKind k, const void* p, const char* message) {
    ++calls;
    kind = k;
    ptr = p;
    line = message;
  }
};

class ErrorRecorderTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ErrorRecorder::calls = 0;
    previous_ = set_error_handler(&ErrorRecorder::handler);
  }
  void TearDown() override { set_error_handler(previous_); }
  ErrorHandler previous_ = nullptr;
};

}  // namespace achunk::testing
