// The per-thread failure reason: its names, the one-line message of each kind, and that
// a thread sees only its own reason.
#include "achunk/base/alloc_failure.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <thread>

namespace achunk {
namespace {

std::string format(const AllocFailure& f) {
  char buf[256];
  format_alloc_failure(f, buf, sizeof(buf));
  return buf;
}

TEST(AllocFailureTest, EachKindHasItsName) {
  EXPECT_STREQ(to_string(AllocFailKind::NONE), "NONE");
  EXPECT_STREQ(to_string(AllocFailKind::INVALID_SIZE), "INVALID_SIZE");
  EXPECT_STREQ(to_string(AllocFailKind::INVALID_ARGUMENT), "INVALID_ARGUMENT");
  EXPECT_STREQ(to_string(AllocFailKind::CTX_LIMIT), "CTX_HOLD_REACH_LIMIT");
  EXPECT_STREQ(to_string(AllocFailKind::TENANT_LIMIT), "TENANT_HOLD_REACH_LIMIT");
  EXPECT_STREQ(to_string(AllocFailKind::SERVER_LIMIT), "SERVER_HOLD_REACH_LIMIT");
  EXPECT_STREQ(to_string(AllocFailKind::PHYSICAL_MEMORY_EXHAUST), "PHYSICAL_MEMORY_EXHAUST");
  EXPECT_STREQ(to_string(static_cast<AllocFailKind>(99)), "UNKNOWN");
}

TEST(AllocFailureTest, MessageOfEachKindNamesSizeHoldLimitAndWhy) {
  EXPECT_EQ(format({AllocFailKind::NONE, 0, 1, 2, 3}), "NONE: size=1 hold=2 limit=3");
  EXPECT_EQ(format({AllocFailKind::INVALID_SIZE, 0, -5, 0, 9}),
            "INVALID_SIZE: size=-5 hold=0 limit=9 (size out of range)");
  EXPECT_EQ(format({AllocFailKind::INVALID_ARGUMENT, 0, 64, 0, 0}),
            "INVALID_ARGUMENT: size=64 hold=0 limit=0 (bad ctx id or alignment, or the tenant "
            "table is full)");
  EXPECT_EQ(format({AllocFailKind::CTX_LIMIT, 0, 100, 4194304, 4194304}),
            "CTX_HOLD_REACH_LIMIT: size=100 hold=4194304 limit=4194304 (the ctx limit of the "
            "tenant)");
  EXPECT_EQ(format({AllocFailKind::TENANT_LIMIT, 0, 7, 8, 9}),
            "TENANT_HOLD_REACH_LIMIT: size=7 hold=8 limit=9 (the tenant limit)");
  EXPECT_EQ(format({AllocFailKind::SERVER_LIMIT, 0, 7, 8, 9}),
            "SERVER_HOLD_REACH_LIMIT: size=7 hold=8 limit=9 (memory_limit reached after the chunk "
            "cache was flushed)");
  EXPECT_EQ(format({AllocFailKind::PHYSICAL_MEMORY_EXHAUST, ENOMEM, 7, 8, 9}),
            "PHYSICAL_MEMORY_EXHAUST: size=7 hold=8 limit=9 errno=" + std::to_string(ENOMEM) +
                " (" + std::strerror(ENOMEM) + ")");
}

TEST(AllocFailureTest, ShortBufferIsCutAndTheNeededLengthReturned) {
  const AllocFailure f{AllocFailKind::TENANT_LIMIT, 0, 7, 8, 9};
  const std::string full = format(f);
  char small[8];
  EXPECT_EQ(format_alloc_failure(f, small, sizeof(small)), static_cast<int64_t>(full.size()));
  EXPECT_EQ(std::string(small), full.substr(0, sizeof(small) - 1));
}

TEST(AllocFailureTest, EachThreadSeesItsOwnReason) {
  set_alloc_failure({AllocFailKind::CTX_LIMIT, 0, 1, 2, 3});
  AllocFailKind seen = AllocFailKind::CTX_LIMIT;
  std::thread([&] { seen = last_alloc_failure().kind; }).join();
  EXPECT_EQ(seen, AllocFailKind::NONE);
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::CTX_LIMIT);
  EXPECT_EQ(last_alloc_failure().limit, 3);
  clear_alloc_failure();
  EXPECT_EQ(last_alloc_failure().kind, AllocFailKind::NONE);
  EXPECT_EQ(last_alloc_failure().size, 0);
}

}  // namespace
}  // namespace achunk
