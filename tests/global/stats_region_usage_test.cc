// The region's usage figures and top labels: the usage dump's numbers for the same state,
// measured only by the housekeeping thread and at most every USAGE_REFRESH_US.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <map>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "global/stats_region_fixture.h"
#include "tools/dump/dump_format.h"

namespace achunk::testing {
namespace {

// print_usage's lines as name -> value maps (numbers without their separators).
std::vector<std::map<std::string, std::string>> usage_lines(ObMallocAllocator& allocator) {
  std::string text(1 << 20, '\0');
  text.resize(allocator.print_usage(text.data(), static_cast<int64_t>(text.size())));
  std::vector<std::map<std::string, std::string>> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    // "name=   1,234" -> "name=1234": the values' padding and separators go.
    std::string packed;
    for (size_t i = 0; i < line.size(); ++i) {
      if (line[i] == ',') continue;
      packed += line[i];
      if (line[i] == '=') {
        while (i + 1 < line.size() && line[i + 1] == ' ') ++i;
      }
    }
    std::map<std::string, std::string>& m = lines.emplace_back();
    std::istringstream words(packed);
    for (std::string w; words >> w;) {
      const size_t eq = w.find('=');
      if (eq != std::string::npos) m[w.substr(0, eq)] = w.substr(eq + 1);
    }
  }
  return lines;
}

int64_t num(const std::map<std::string, std::string>& m, const char* key) {
  const auto it = m.find(key);
  EXPECT_NE(it, m.end()) << key;
  return it == m.end() ? -2 : std::stoll(it->second);
}

class StatsRegionUsageTest : public StatsRegionTest {
 protected:
  ~StatsRegionUsageTest() override {
    for (void* p : live_) ObMallocAllocator::free(p);
  }
  void alloc(uint64_t tenant, int ctx, const std::string& label, int64_t size, int n) {
    labels_.push_back(label);
    for (int i = 0; i < n; ++i) {
      live_.push_back(
          host_.allocator().alloc(size, ObMemAttr(tenant, labels_.back().c_str(), ctx)));
      ASSERT_NE(live_.back(), nullptr);
    }
  }

  // Defined with older_region, below.
  void read_older(uint16_t minor, uint32_t row_bytes, dump::Snapshot* out);

  std::vector<void*> live_;
  std::vector<std::string> labels_{};
};

// Three (tenant, ctx)s, 24 labels of distinct holds (more than the region keeps), free
// spans partly resident: every figure is the one print_usage shows.
TEST_F(StatsRegionUsageTest, FiguresAndTopLabelsMatchThePrintedUsage) {
  labels_.reserve(64);
  const struct {
    uint64_t tenant;
    int ctx;
  } where[] = {{1001, 0}, {1002, 0}, {1002, 1}};
  for (int k = 0; k < 24; ++k) {
    alloc(where[k % 3].tenant, where[k % 3].ctx, "lab" + std::to_string(k), 700 + 8 * k, k + 1);
  }
  // Big objects freed again: free spans in two of the ctxs.
  for (int i = 0; i < 3; ++i) {
    void* big = host_.allocator().alloc(300 << 10, ObMemAttr(1001, "tmp"));
    void* big2 = host_.allocator().alloc(200 << 10, ObMemAttr(1002, "tmp", 1));
    ObMallocAllocator::free(big);
    ObMallocAllocator::free(big2);
  }
  // A thread that allocates in the first ctx and exits: its emptied slabs stay warm.
  std::thread([&] {
    void* q = host_.allocator().alloc(48, ObMemAttr(1001, "exiting"));
    ASSERT_NE(q, nullptr);
    ObMallocAllocator::free(q);
  }).join();
  os_.set_resident_every(2);  // half of every span in RAM: measured, not free - washed
  tick();
  const dump::Snapshot s = snapshot();

  struct Label {
    uint64_t tenant;
    std::string ctx;
    std::string mod;
    int64_t hold, used, count;
  };
  std::vector<Label> printed;
  uint64_t tenant = 0;
  std::string ctx;
  size_t row = 0;
  size_t span_lines = 0;
  ASSERT_EQ(s.ctxs.size(), 3u);
  for (const auto& m : usage_lines(host_.allocator())) {
    if (m.count("tenant_id") != 0) {
      tenant = static_cast<uint64_t>(num(m, "tenant_id"));
      ctx = m.at("ctx_id");
      ASSERT_LT(row, s.ctxs.size());
      const dump::CtxRow& c = s.ctxs[row++];
      EXPECT_EQ(c.tenant_id, tenant);
      EXPECT_EQ(c.ctx_name, ctx);
      EXPECT_EQ(c.hold, num(m, "hold"));
      EXPECT_EQ(c.used, num(m, "used"));
      EXPECT_EQ(c.free_spans, num(m, "free_spans"));
      EXPECT_EQ(c.washed, num(m, "washed"));
    } else if (m.count("free_resident") != 0) {
      // The spans line: the region carries each of its figures.
      const dump::CtxRow& c = s.ctxs[row - 1];
      EXPECT_EQ(c.free_resident, num(m, "free_resident"));
      EXPECT_EQ(c.spans.slabs, num(m, "slabs"));
      EXPECT_EQ(c.spans.slab_slots, num(m, "slab_slots"));
      EXPECT_EQ(c.spans.slab_live, num(m, "slab_live"));
      EXPECT_EQ(c.spans.empty_slabs, num(m, "empty_slabs"));
      EXPECT_EQ(c.spans.slab_resident, num(m, "slab_resident"));
      EXPECT_EQ(c.spans.big, num(m, "big"));
      EXPECT_EQ(c.spans.big_resident, num(m, "big_resident"));
      EXPECT_EQ(c.spans.other, num(m, "other"));
      EXPECT_EQ(c.spans.spares_reclaimed, num(m, "spares_reclaimed"));
      EXPECT_EQ(c.spans.warm_slabs, num(m, "warm_slabs"));
      ++span_lines;
    } else if (m.count("mod") != 0) {
      printed.push_back(
          {tenant, ctx, m.at("mod"), num(m, "hold"), num(m, "used"), num(m, "count")});
    }
  }
  EXPECT_EQ(row, 3u);
  EXPECT_EQ(span_lines, 3u);
  EXPECT_GT(s.ctxs[0].free_spans, 0);
  // The thread that exited left its emptied slabs warm in the first ctx.
  EXPECT_GT(s.ctxs[0].spans.warm_slabs, 0);
  EXPECT_GT(s.ctxs[0].spans.slab_live, 0);
  EXPECT_GT(s.ctxs[0].free_resident, 0);
  EXPECT_NE(s.ctxs[0].free_resident, s.ctxs[0].free_spans - s.ctxs[0].washed);

  std::stable_sort(printed.begin(), printed.end(),
                   [](const Label& a, const Label& b) { return a.hold > b.hold; });
  ASSERT_GT(printed.size(), stats::LABEL_CAPACITY);
  ASSERT_EQ(s.labels.size(), stats::LABEL_CAPACITY);
  EXPECT_EQ(s.get("label_count"), stats::LABEL_CAPACITY);
  for (size_t i = 0; i < s.labels.size(); ++i) {
    const dump::LabelRow& l = s.labels[i];
    EXPECT_EQ(l.tenant_id, printed[i].tenant) << i;
    EXPECT_EQ(l.ctx_name, printed[i].ctx) << i;
    EXPECT_EQ(l.label, printed[i].mod) << i;
    EXPECT_EQ(l.hold, printed[i].hold) << i;
    EXPECT_EQ(l.used, printed[i].used) << i;
    EXPECT_EQ(l.count, printed[i].count) << i;
  }
  EXPECT_EQ(s.labels[0].label, "lab23");
}

// Chunk-level calls (which may hold allocator locks) never scan; the housekeeping thread
// scans at most every USAGE_REFRESH_US and the rows keep the last scan in between.
TEST_F(StatsRegionUsageTest, OnlyTheHousekeepingThreadScansAtMostEveryInterval) {
  alloc(1002, 0, "first", 1000, 4);
  tick(false);
  dump::Snapshot s = snapshot();
  EXPECT_EQ(region_.usage_scans(), 0);
  ASSERT_EQ(s.ctxs.size(), 1u);
  EXPECT_EQ(s.ctxs[0].used, -1);  // not measured yet
  EXPECT_EQ(s.ctxs[0].free_resident, -1);
  EXPECT_TRUE(s.labels.empty());
  EXPECT_EQ(s.get("usage_age_ms"), -1);

  tick(true);
  EXPECT_EQ(region_.usage_scans(), 1);
  EXPECT_EQ(snapshot().ctxs[0].used, 4000);

  alloc(1002, 0, "second", 500, 2);
  alloc(1003, 0, "other", 100, 1);  // a ctx the last scan did not see
  const int64_t steps = StatsRegion::USAGE_REFRESH_US / StatsRegion::REFRESH_US;
  for (int64_t i = 1; i < steps; ++i) tick(i % 2 == 0);
  s = snapshot();
  EXPECT_EQ(region_.usage_scans(), 1);
  EXPECT_EQ(s.get("usage_scans"), 1);
  EXPECT_EQ(s.get("usage_age_ms"), (steps - 1) * StatsRegion::REFRESH_US / 1000);
  // Each text [MEMORY] line of a ctx, its own and its spans line, carries that age next
  // to the figures it dates (9.9 s here); the overhead line is the refresh's.
  ASSERT_EQ(steps, 100);
  const std::string text = dump::format_text(s);
  size_t lines = 0;
  for (size_t at = text.find("[MEMORY]"); at != std::string::npos;
       at = text.find("[MEMORY]", at + 1)) {
    const std::string line = text.substr(at, text.find('\n', at) + 1 - at);
    if (line.starts_with("[MEMORY] overhead=")) continue;
    EXPECT_TRUE(line.find(" usage_age_ms=   9,900 ") != std::string::npos ||
                line.find(" usage_age_ms=   9,900\n") != std::string::npos)
        << line;
    ++lines;
  }
  EXPECT_EQ(lines, 4u);
  ASSERT_EQ(s.ctxs.size(), 2u);
  EXPECT_EQ(s.ctxs[0].used, 4000);  // the last scan's
  EXPECT_EQ(s.ctxs[1].used, -1);
  ASSERT_EQ(s.labels.size(), 1u);
  EXPECT_EQ(s.labels[0].label, "first");

  tick(true);
  s = snapshot();
  EXPECT_EQ(region_.usage_scans(), 2);
  EXPECT_EQ(s.ctxs[0].used, 5000);
  EXPECT_EQ(s.ctxs[1].used, 100);
  EXPECT_EQ(s.labels.size(), 3u);
}

// A row's usage figures come with the hold they were measured against: the row's hold is
// the refresh's and moves between scans (an operator once read used above hold).
TEST_F(StatsRegionUsageTest, ARowCarriesTheHoldItsUsageWasMeasuredAgainst) {
  alloc(1002, 0, "scan", 1000, 4);
  tick(false);
  EXPECT_EQ(snapshot().ctxs[0].usage_hold, -1);  // not measured yet
  tick(true);
  dump::Snapshot s = snapshot();
  ASSERT_EQ(s.ctxs.size(), 1u);
  const int64_t measured = s.ctxs[0].hold;
  EXPECT_EQ(s.ctxs[0].usage_hold, measured);
  EXPECT_LE(s.ctxs[0].used + s.ctxs[0].free_spans, measured);
  // A big object takes chunks of its own: the hold moves, the last scan's does not.
  alloc(1002, 0, "scan", 5 << 20, 1);
  tick(false);
  s = snapshot();
  EXPECT_GT(s.ctxs[0].hold, measured + (5 << 20) - 1);
  EXPECT_EQ(s.ctxs[0].usage_hold, measured);
  EXPECT_EQ(s.ctxs[0].used, 4000);
  EXPECT_NE(dump::format_text(s).find("usage_hold="), std::string::npos);
}

// The region as an older writer would have laid it out: version 1.`minor`, with ctx rows
// of `row_bytes` (two rows) and, for 1.0, no label table.
std::vector<unsigned char> older_region(const unsigned char* bytes, uint16_t minor,
                                        uint32_t row_bytes) {
  std::vector<unsigned char> b(bytes, bytes + stats::REGION_SIZE);
  auto* h = reinterpret_cast<stats::Header*>(b.data());
  h->minor = minor;
  for (int i = 0; i < 2; ++i) {
    std::memmove(b.data() + h->ctx_offset + i * row_bytes,
                 b.data() + h->ctx_offset + i * sizeof(stats::CtxRow), row_bytes);
  }
  h->ctx_stride = row_bytes;
  if (minor == 0) {
    h->label_offset = h->label_capacity = h->label_stride = 0;
    for (uint32_t i = 0; i < h->field_count; ++i) {
      auto* d = reinterpret_cast<stats::FieldDesc*>(b.data() + h->field_offset) + i;
      if (std::strcmp(d->name, "label_count") == 0) std::strcpy(d->name, "x");
    }
  }
  return b;
}

// Two ctxs with an object each, read back through a copy of the region made to look like
// version 1.`minor` with rows of `row_bytes`.
void StatsRegionUsageTest::read_older(uint16_t minor, uint32_t row_bytes, dump::Snapshot* out) {
  alloc(1002, 0, "older", 100, 1);
  alloc(1003, 0, "older", 100, 1);
  tick();
  const std::vector<unsigned char> b = older_region(region_.bytes(), minor, row_bytes);
  absl::StatusOr<dump::Snapshot> s = dump::parse_region(b.data(), b.size());
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_EQ(s->ctxs.size(), 2u);
  EXPECT_EQ(s->ctxs[1].tenant_id, 1003u);
  *out = *std::move(s);
}

// A 1.0 region's shorter ctx rows and missing label table still read, as unknown.
TEST_F(StatsRegionUsageTest, AVersion10RegionReadsWithUnknownUsage) {
  dump::Snapshot s;
  ASSERT_NO_FATAL_FAILURE(read_older(0, stats::CTX_ROW_SIZE_1_0, &s));
  EXPECT_EQ(s.ctxs[1].hold, 2 << 20);
  EXPECT_EQ(s.ctxs[1].used, -1);
  EXPECT_EQ(s.ctxs[1].free_resident, -1);
  EXPECT_EQ(s.ctxs[1].usage_hold, -1);
  EXPECT_TRUE(s.labels.empty());
}

// A 1.3 row (96 bytes) has the usage figures but not the hold they were measured against.
TEST_F(StatsRegionUsageTest, AVersion13RegionReadsWithUnknownUsageHold) {
  dump::Snapshot s;
  ASSERT_NO_FATAL_FAILURE(read_older(3, offsetof(stats::CtxRow, usage_hold), &s));
  EXPECT_EQ(s.ctxs[1].used, 100);
  EXPECT_EQ(s.ctxs[1].usage_hold, -1);
}

// A 1.6 row (104 bytes) has no spans line: its figures read as unknown, and the text
// form leaves the line out.
TEST_F(StatsRegionUsageTest, AVersion16RegionReadsWithoutTheSpansLine) {
  dump::Snapshot s;
  ASSERT_NO_FATAL_FAILURE(read_older(6, offsetof(stats::CtxRow, spans), &s));
  EXPECT_EQ(s.ctxs[1].used, 100);
  EXPECT_EQ(s.ctxs[1].usage_hold, 2 << 20);
  EXPECT_EQ(s.ctxs[1].spans.slabs, -1);
  EXPECT_EQ(s.ctxs[1].spans.warm_slabs, -1);
  const std::string text = dump::format_text(s);
  EXPECT_NE(text.find("[MEMORY] tenant_id= 1003"), std::string::npos) << text;
  EXPECT_EQ(text.find(" slabs="), std::string::npos) << text;
  EXPECT_NE(dump::format_json(s).find("\"spans\":{\"slabs\":-1,"), std::string::npos);
}

}  // namespace
}  // namespace achunk::testing
