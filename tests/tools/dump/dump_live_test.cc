// achunk-dump against real processes under LD_PRELOAD=libachunk_malloc.so (Release only):
// the region appears, a cache size change is applied by the child and unmaps the
// surplus, a release moves the counters, the housekeeping thread runs (also in a forked
// child), --watch --plot draws a live process's timeline, --list tells of another user's
// process, --help prints every mode, and the tool's command line fails cleanly on each
// bad input.
#include <linux/capability.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

#include "absl/strings/str_format.h"
#include "tools/dump/region_reader.h"

namespace achunk::testing {
namespace {

struct Child {
  pid_t pid = -1;
  pid_t grandchild = 0;
};

// Starts idle_burst under the drop-in malloc and waits for its "ready" line.
Child start(const std::string& conf, const char* arg) {
  int out[2];
  if (pipe(out) != 0) return {};
  Child c;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(out[1], 1);
    close(out[0]);
    setenv("LD_PRELOAD", ACHUNK_MALLOC_SO, 1);
    setenv("ACHUNK_CONF", conf.c_str(), 1);
    execl(IDLE_BURST, IDLE_BURST, arg, static_cast<char*>(nullptr));
    _exit(127);
  }
  close(out[1]);
  char buf[64] = {};
  std::FILE* f = fdopen(out[0], "r");
  if (std::fgets(buf, sizeof(buf), f) != nullptr) std::sscanf(buf, "ready %d", &c.grandchild);
  std::fclose(f);
  return c;
}

// The grandchild too: it would hold the test's stderr open for its whole minute of sleep.
void stop(const Child& c) {
  if (c.grandchild > 0) kill(c.grandchild, SIGKILL);
  kill(c.pid, SIGKILL);
  waitpid(c.pid, nullptr, 0);
}

// The tool's exit code and its stdout+stderr.
int tool(const std::string& args, std::string* out) {
  std::FILE* p = popen((std::string(ACHUNK_DUMP) + " " + args + " 2>&1").c_str(), "r");
  out->clear();
  char buf[4096];
  size_t n = 0;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  const int status = pclose(p);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

bool has_bg_thread(pid_t pid) {
  for (int tries = 0; tries < 100; ++tries) {
    const std::string out = absl::StrFormat("/proc/%d/task", pid);
    std::string cmd = "cat " + out + "/*/comm 2>/dev/null";
    std::FILE* p = popen(cmd.c_str(), "r");
    char buf[4096] = {};
    const size_t n = std::fread(buf, 1, sizeof(buf) - 1, p);
    pclose(p);
    if (std::string(buf, n).find("achunk-bg") != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

// The region of `pid` once it exists (a forked child makes its own on its first
// allocation or housekeeping tick).
absl::StatusOr<std::unique_ptr<dump::Region>> open_when_there(pid_t pid, bool force = false) {
  absl::StatusOr<std::unique_ptr<dump::Region>> r = dump::Region::open_pid(pid, force);
  for (int tries = 0; !r.ok() && tries < 150; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    r = dump::Region::open_pid(pid, force);
  }
  return r;
}

// A snapshot taken after the next refresh (the housekeeping thread's tick at the latest).
absl::StatusOr<dump::Snapshot> fresh(dump::Region& r) {
  absl::StatusOr<dump::Snapshot> first = r.snapshot();
  if (!first.ok()) return first;
  for (int tries = 0; tries < 150; ++tries) {
    absl::StatusOr<dump::Snapshot> s = r.snapshot();
    if (!s.ok() || s->refreshes > first->refreshes) return s;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return first;
}

// A snapshot taken after the usage scan that follows scan number `scans` (they run every
// StatsRegion::USAGE_REFRESH_US, 10 s).
absl::StatusOr<dump::Snapshot> after_next_usage_scan(dump::Region& r, int64_t scans) {
  absl::StatusOr<dump::Snapshot> s = r.snapshot();
  for (int tries = 0; tries < 150 && s.ok() && s->get("usage_scans") <= scans; ++tries) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    s = r.snapshot();
  }
  return s;
}

TEST(DumpLiveTest, ReadsChangesAndReleasesALiveProcess) {
  const Child c = start("", "fork");
  ASSERT_GT(c.pid, 0);
  absl::StatusOr<std::unique_ptr<dump::Region>> r = open_when_there(c.pid);
  ASSERT_TRUE(r.ok()) << r.status();
  absl::StatusOr<dump::Snapshot> s = fresh(**r);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->pid, c.pid);
  EXPECT_GE(s->get("chunk_mgr.freelists_hold"), int64_t{16} << 20);
  EXPECT_EQ(s->get("option.release_interval_ms"), 1000);  // the drop-in default
  EXPECT_TRUE(has_bg_thread(c.pid));
  // The housekeeping thread's first tick scanned usage; a ctx it saw has its figures.
  EXPECT_GE(s->get("usage_scans"), 1);
  EXPECT_EQ(static_cast<int64_t>(s->labels.size()), s->get("label_count"));
  // The main thread allocated, so it holds a state.
  EXPECT_GE(s->get("thread_states"), 1);
  EXPECT_GE(s->get("thread_states_free"), 0);
  EXPECT_GE(s->get("lock_sleeps", -1), 0);  // published (region 1.8), a count
  // A row's used and free_spans come from the last usage scan, with the hold that scan
  // measured them against (its hold is the refresh's). The first scan may have run during
  // the burst (24 live 1.5 MiB blocks), so the rows are read from the next one, which runs
  // with the process idle.
  absl::StatusOr<dump::Snapshot> u = after_next_usage_scan(**r, s->get("usage_scans"));
  ASSERT_TRUE(u.ok()) << u.status();
  ASSERT_GT(u->get("usage_scans"), s->get("usage_scans"));
  for (const dump::CtxRow& row : u->ctxs) {
    EXPECT_GE(row.usage_hold, 0) << row.ctx_name;
    EXPECT_LE(row.used, row.usage_hold) << row.ctx_name;
    EXPECT_LE(row.free_spans, row.usage_hold) << row.ctx_name;
  }
  const int64_t unmaps = u->get("chunk_mgr.total_unmaps");

  absl::StatusOr<dump::ControlAnswer> a = (*r)->request(
      stats::ControlOp::SET_OPTION, "memory_chunk_cache_size", "2M", absl::Seconds(5));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->result, 0) << a->message;
  EXPECT_EQ(a->before, 0);
  EXPECT_EQ(a->after, 2 << 20);
  s = (*r)->snapshot();  // refreshed right after the request was served
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->get("option.memory_chunk_cache_size"), 2 << 20);
  EXPECT_LE(s->get("chunk_mgr.freelists_hold"), 2 << 20);
  EXPECT_GT(s->get("chunk_mgr.total_unmaps"), unmaps);

  a = (*r)->request(stats::ControlOp::RELEASE_ALL, "", "", absl::Seconds(5));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->result, 0) << a->message;
  EXPECT_GT(a->before, 0);  // RSS
  s = (*r)->snapshot();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->get("chunk_mgr.freelists_hold"), 0);
  EXPECT_EQ(s->get("requests_served"), 2);

  // The forked child has its own region and its own housekeeping thread.
  ASSERT_GT(c.grandchild, 0);
  absl::StatusOr<std::unique_ptr<dump::Region>> g = open_when_there(c.grandchild);
  ASSERT_TRUE(g.ok()) << g.status();
  absl::StatusOr<dump::Snapshot> gs = (*g)->snapshot();
  ASSERT_TRUE(gs.ok()) << gs.status();
  EXPECT_EQ(gs->pid, c.grandchild);
  EXPECT_TRUE(has_bg_thread(c.grandchild));
  // The parent's region was not touched by the child.
  s = (*r)->snapshot();
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->pid, c.pid);

  std::string out;
  EXPECT_EQ(tool(std::to_string(c.pid), &out), 0) << out;
  EXPECT_EQ(out.rfind("[chunk_mgr] limit=", 0), 0u) << out;
  EXPECT_NE(out.find("[CHUNK_MGR] 20 MB_CACHE:"), std::string::npos);
  EXPECT_NE(out.find("[OPTIONS] memory_chunk_cache_size=2097152"), std::string::npos) << out;
  EXPECT_NE(out.find(" free_resident="), std::string::npos) << out;
  EXPECT_NE(out.find(" warm_slabs="), std::string::npos) << out;  // each ctx's spans line
  EXPECT_EQ(tool("--json " + std::to_string(c.pid), &out), 0) << out;
  EXPECT_EQ(out.rfind("{\"version\":\"1\"", 0), 0u) << out;
  EXPECT_NE(out.find("\"warm_slabs\":"), std::string::npos) << out;
  EXPECT_EQ(tool("--watch " + std::to_string(c.pid) + " 0.1 2", &out), 0) << out;
  EXPECT_NE(out.find("maps/s"), std::string::npos) << out;
  EXPECT_EQ(tool("--set span_idle_ms=250 " + std::to_string(c.pid), &out), 0) << out;
  EXPECT_EQ(out, "span_idle_ms: 1,000 -> 250\n");
  EXPECT_EQ(tool("--set nope=1 " + std::to_string(c.pid), &out), 1);
  EXPECT_EQ(out, absl::StrFormat("achunk-dump: process %d rejected nope: unknown option 'nope'\n",
                                 c.pid));
  EXPECT_EQ(tool("--set memory_limit=-3 " + std::to_string(c.pid), &out), 1);
  EXPECT_NE(out.find("out of range"), std::string::npos) << out;
  EXPECT_EQ(tool("--release " + std::to_string(c.pid), &out), 0) << out;
  EXPECT_EQ(out.rfind("release expired: unmapped", 0), 0u) << out;
  EXPECT_EQ(tool("--list", &out), 0) << out;
  EXPECT_NE(out.find(absl::StrFormat("%8d preload_idle_bu", c.pid)), std::string::npos) << out;
  stop(c);
  EXPECT_EQ(tool(std::to_string(c.pid), &out), 1);
  EXPECT_EQ(out, absl::StrFormat("achunk-dump: no such process: %d\n", c.pid));
}

TEST(DumpLiveTest, AnIdleProcessWithoutTheThreadDoesNotAnswer) {
  const Child c = start("release_interval_ms:0", "");
  ASSERT_GT(c.pid, 0);
  EXPECT_FALSE(has_bg_thread(c.pid));
  std::string out;
  EXPECT_EQ(tool("--timeout=300ms --set span_idle_ms=5 " + std::to_string(c.pid), &out), 1);
  EXPECT_NE(out.find("did not answer within 300ms"), std::string::npos) << out;
  EXPECT_NE(out.find("release_interval_ms"), std::string::npos) << out;
  stop(c);
}

TEST(DumpLiveTest, RegionOffMeansNoRegion) {
  const Child c = start("stats_region:0", "");
  ASSERT_GT(c.pid, 0);
  std::string out;
  EXPECT_EQ(tool(std::to_string(c.pid), &out), 1);
  EXPECT_NE(out.find("has no achunk stats region"), std::string::npos) << out;
  stop(c);
}

TEST(DumpLiveTest, WatchDrawsALiveProcessTimeline) {
  const Child c = start("", "");
  ASSERT_GT(c.pid, 0);
  ASSERT_TRUE(open_when_there(c.pid).ok());
  const std::string png = ::testing::TempDir() + "/achunk_watch_plot.png";
  std::remove(png.c_str());
  std::string out;
  EXPECT_EQ(tool("--watch " + std::to_string(c.pid) + " 0.1 3 --plot " + png, &out), 0) << out;
  EXPECT_NE(out.find("maps/s"), std::string::npos) << out;
  EXPECT_NE(out.find("wrote " + png), std::string::npos) << out;
  std::ifstream f(png, std::ios::binary);
  char magic[4] = {};
  f.read(magic, 4);
  EXPECT_EQ(std::string(magic + 1, 3), "PNG");
  // Without a COUNT the watch never ends, so there would be nothing to draw.
  EXPECT_EQ(tool("--watch " + std::to_string(c.pid) + " --plot " + png, &out), 1);
  EXPECT_EQ(out, "achunk-dump: --plot wants --log FILE, or --watch PID INTERVAL COUNT\n");
  EXPECT_EQ(tool("--plot " + png + " " + std::to_string(c.pid), &out), 1);
  stop(c);
  std::remove(png.c_str());
}

// A small forked child that idles within its first interval has no region (nor thread)
// of its own, and the tool says why; its parent has both.
TEST(DumpLiveTest, AYoungSmallChildHasNoRegionAndTheToolSaysWhy) {
  const Child c = start("", "young");
  ASSERT_GT(c.pid, 0);
  ASSERT_GT(c.grandchild, 0);
  ASSERT_TRUE(open_when_there(c.pid).ok());
  EXPECT_TRUE(has_bg_thread(c.pid));
  std::string out;
  EXPECT_EQ(tool(std::to_string(c.grandchild), &out), 1);
  EXPECT_NE(out.find("has no achunk stats region yet"), std::string::npos) << out;
  EXPECT_NE(out.find("release_interval_ms"), std::string::npos) << out;
  // Its only thread is its own: no achunk-bg.
  EXPECT_EQ(
      std::system(absl::StrFormat("grep -q achunk-bg /proc/%d/task/*/comm", c.grandchild).c_str()),
      256);
  stop(c);
}

// A process of one's own user that holds a capability the reader lacks (mariadbd under
// mariadb.service holds CAP_IPC_LOCK) cannot be looked into; the tool says why and how.
TEST(DumpLiveTest, AProcessWithCapabilitiesTheReaderLacksIsNamed) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to make a process that holds a capability";
  constexpr uid_t NOBODY = 65534;
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  const pid_t holder = fork();
  if (holder == 0) {
    // nobody, keeping CAP_IPC_LOCK permitted, dumpable so /proc shows it as nobody's.
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct caps[2] = {};
    caps[CAP_TO_INDEX(CAP_IPC_LOCK)].permitted = CAP_TO_MASK(CAP_IPC_LOCK);
    if (prctl(PR_SET_KEEPCAPS, 1) != 0 || setresgid(NOBODY, NOBODY, NOBODY) != 0 ||
        setresuid(NOBODY, NOBODY, NOBODY) != 0 || syscall(SYS_capset, &header, caps) != 0 ||
        prctl(PR_SET_DUMPABLE, 1) != 0) {
      _exit(1);
    }
    [[maybe_unused]] ssize_t n = write(ready[1], "r", 1);
    pause();
    _exit(0);
  }
  char c = 0;
  ASSERT_EQ(read(ready[0], &c, 1), 1);
  const pid_t reader = fork();
  if (reader == 0) {
    if (setresgid(NOBODY, NOBODY, NOBODY) != 0 || setresuid(NOBODY, NOBODY, NOBODY) != 0) _exit(2);
    absl::StatusOr<std::unique_ptr<dump::Region>> r = dump::Region::open_pid(holder, false);
    if (r.ok() || r.status().message().find("CAP_IPC_LOCK") == std::string_view::npos) {
      std::fprintf(stderr, "open_pid: %s\n",
                   r.ok() ? "ok" : std::string(r.status().message()).c_str());
      _exit(3);
    }
    bool named = false;
    for (const dump::ProcessScan::Process& p : dump::scan_processes(false).unreadable_own) {
      named = named || p.pid == holder;
    }
    _exit(named ? 0 : 4);
  }
  int status = 0;
  waitpid(reader, &status, 0);
  kill(holder, SIGKILL);
  waitpid(holder, nullptr, 0);
  EXPECT_TRUE(WIFEXITED(status)) << status;
  EXPECT_EQ(WEXITSTATUS(status), 0);
}

TEST(DumpLiveTest, HelpTellsEveryModeAndExitsZero) {
  std::string out;
  for (const char* flag : {"--help", "-h"}) {
    EXPECT_EQ(tool(flag, &out), 0) << out;
    for (const char* part : {"achunk-dump PID", "--json PID", "--watch PID", "--plot OUT.png",
                             "--set NAME=VALUE PID", "--release [expired|all] PID", "--list",
                             "--log FILE|-", "--timeout", "--force", "Exit status"}) {
      EXPECT_NE(out.find(part), std::string::npos) << part << " missing from " << flag;
    }
  }
}

// A root operator's --list names the server another user runs and says how to read it;
// --force lists and reads it.
TEST(DumpLiveTest, ListTellsOfAnotherUsersProcess) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root, to run a process as another user";
  const Child c = start("", "nobody");
  ASSERT_GT(c.pid, 0);
  ASSERT_TRUE(open_when_there(c.pid, true).ok());
  std::string out;
  EXPECT_EQ(tool("--list", &out), 0) << out;
  EXPECT_EQ(out.find(absl::StrFormat("%8d preload_idle_bu", c.pid)), std::string::npos) << out;
  EXPECT_NE(out.find(absl::StrFormat("%d preload_idle_bu of nobody", c.pid)), std::string::npos)
      << out;
  EXPECT_NE(out.find("or add --force"), std::string::npos) << out;
  EXPECT_EQ(tool("--list --force", &out), 0) << out;
  EXPECT_NE(out.find(absl::StrFormat("%8d preload_idle_bu  nobody", c.pid)), std::string::npos)
      << out;
  EXPECT_EQ(out.find("of nobody"), std::string::npos) << out;
  EXPECT_EQ(tool(std::to_string(c.pid), &out), 1);
  EXPECT_NE(out.find("refused (--force reads it anyway)"), std::string::npos) << out;
  EXPECT_EQ(tool("--force " + std::to_string(c.pid), &out), 0) << out;
  EXPECT_NE(out.find("[chunk_mgr]"), std::string::npos) << out;
  // Its own user cannot open the region root made before the switch, and is told why.
  const pid_t reader = fork();
  if (reader == 0) {
    if (setresgid(65534, 65534, 65534) != 0 || setresuid(65534, 65534, 65534) != 0) _exit(2);
    absl::StatusOr<std::unique_ptr<dump::Region>> r = dump::Region::open_pid(c.pid, false);
    _exit(!r.ok() && r.status().message().find("made it before the process became uid 65534") !=
                         std::string_view::npos
              ? 0
              : 1);
  }
  int status = 0;
  waitpid(reader, &status, 0);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  stop(c);
}

TEST(DumpLiveTest, BadCommandLines) {
  std::string out;
  EXPECT_EQ(tool("", &out), 1);
  EXPECT_EQ(out, "achunk-dump: no PID given (see --help)\n");
  EXPECT_EQ(tool("abc", &out), 1);
  EXPECT_EQ(out, "achunk-dump: not a process id: 'abc'\n");
  EXPECT_EQ(tool("999999999", &out), 1);
  EXPECT_EQ(out, "achunk-dump: no such process: 999999999\n");
}

}  // namespace
}  // namespace achunk::testing
