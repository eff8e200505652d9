// achunk-dump: reads a running process's achunk stats region from outside (the dump,
// --json, --watch, --list) and steers it (--set, --release); --help prints usage.h's
// text (achunk-dump(1) is made from the same data). Every failure is one line on stderr
// and a non-zero exit. Depends on region_reader.h, dump_format.h, log_parser.h, usage.h
// and abseil.
#include <unistd.h>

#include <cstdio>
#include <ctime>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "tools/dump/dump_format.h"
#include "tools/dump/log_parser.h"
#include "tools/dump/region_reader.h"
#include "tools/dump/usage.h"

ABSL_FLAG(bool, json, false, "print JSON (one document; with --watch one object per line)");
ABSL_FLAG(bool, watch, false, "print one row per INTERVAL seconds (default 1), COUNT times");
ABSL_FLAG(std::string, set, "", "NAME=VALUE: set an option in the process");
ABSL_FLAG(std::string, release, "", "expired|all: release idle memory in the process now");
// A string parsed with absl::ParseDuration ("5s", "300ms"): an absl::Duration flag is
// stored under a sequence lock built on a fence, which ThreadSanitizer builds refuse.
ABSL_FLAG(std::string, timeout, "5s", "how long to wait for an answer (5s, 300ms, ...)");
ABSL_FLAG(bool, list, false, "list this user's processes that have a stats region");
ABSL_FLAG(bool, force, false, "read another user's process");
ABSL_FLAG(std::string, log, "", "FILE or -: summarise the [chunk_mgr] lines of a log");
ABSL_FLAG(std::string, plot, "",
          "with --log or --watch (and a COUNT): draw hold, used, cache, RSS and maps/unmaps to "
          "OUT.png");

namespace achunk::dump {
namespace {

int fail(const std::string& message) {
  std::fprintf(stderr, "achunk-dump: %s\n", message.c_str());
  return 1;
}

std::string now_hms() {
  const std::time_t t = std::time(nullptr);
  char buf[16];
  std::tm tm;
  localtime_r(&t, &tm);
  std::strftime(buf, sizeof(buf), "%H:%M:%S", &tm);
  return buf;
}

std::string comm(pid_t pid) {
  std::FILE* f = std::fopen(absl::StrFormat("/proc/%d/comm", pid).c_str(), "r");
  if (f == nullptr) return "?";
  char buf[64] = {};
  if (std::fgets(buf, sizeof(buf), f) == nullptr) buf[0] = '\0';
  std::fclose(f);
  return std::string(absl::StripSuffix(buf, "\n"));
}

// Own processes (every user's with --force), then on stderr what was skipped and how to
// read it: a root operator would otherwise see nothing of a server run as mysql.
int list(bool every_user) {
  const ProcessScan scan = scan_processes(every_user);
  std::printf("%8s %-16s %-10s %14s %14s %14s\n", "pid", "command", "user", "hold", "cache", "rss");
  std::vector<std::string> unread;
  for (const ProcessScan::Process& p : scan.listed) {
    absl::StatusOr<std::unique_ptr<Region>> r = Region::open_pid(p.pid, every_user);
    absl::StatusOr<Snapshot> s = r.ok() ? (*r)->snapshot() : absl::StatusOr<Snapshot>(r.status());
    if (!s.ok()) {
      // Gone meanwhile: not worth a line.
      if (!absl::IsNotFound(s.status())) unread.emplace_back(s.status().message());
      continue;
    }
    std::printf("%8d %-16s %-10s %14s %14s %14s\n", p.pid, comm(p.pid).c_str(),
                user_name(p.uid).c_str(), grouped(s->get("chunk_mgr.hold")).c_str(),
                grouped(s->get("chunk_mgr.freelists_hold")).c_str(),
                grouped(process_rss(p.pid)).c_str());
  }
  std::fflush(stdout);
  // A region made before the process changed its user (a server started as root that
  // drops to mysql) opens for root only.
  for (const std::string& why : unread) std::fprintf(stderr, "achunk-dump: %s\n", why.c_str());
  const size_t n = scan.skipped_with_region.size();
  if (n > 0) {
    std::string who;
    for (size_t i = 0; i < n && i < 8; ++i) {
      const ProcessScan::Process& p = scan.skipped_with_region[i];
      absl::StrAppendFormat(&who, "%s%d %s of %s", i == 0 ? "" : ", ", p.pid, comm(p.pid),
                            user_name(p.uid));
    }
    if (n > 8) absl::StrAppend(&who, ", ...");
    std::fprintf(stderr,
                 "achunk-dump: skipped %zu process%s of other users with a stats region (%s); "
                 "read them as their user (sudo -u USER achunk-dump --list) or add --force\n",
                 n, n == 1 ? "" : "es", who.c_str());
  }
  if (!scan.unreadable_own.empty()) {
    std::string who;
    for (size_t i = 0; i < scan.unreadable_own.size() && i < 8; ++i) {
      const ProcessScan::Process& p = scan.unreadable_own[i];
      absl::StrAppendFormat(&who, "%s%d %s", i == 0 ? "" : ", ", p.pid, comm(p.pid));
    }
    std::fprintf(stderr,
                 "achunk-dump: cannot look into %zu process%s of your user (%s): they hold "
                 "capabilities you lack, as mariadbd under mariadb.service holds CAP_IPC_LOCK; "
                 "read them as root with --force\n",
                 scan.unreadable_own.size(), scan.unreadable_own.size() == 1 ? "" : "es",
                 who.c_str());
  }
  if (scan.skipped_unreadable > 0) {
    std::fprintf(stderr,
                 "achunk-dump: skipped %lld process%s of other users whose descriptors uid %u "
                 "cannot read; read them as their user, or as root with --force\n",
                 static_cast<long long>(scan.skipped_unreadable),
                 scan.skipped_unreadable == 1 ? "" : "es", static_cast<unsigned>(geteuid()));
  }
  return 0;
}

int answer(const absl::StatusOr<ControlAnswer>& a, pid_t pid, const std::string& what,
           bool release) {
  if (!a.ok()) return fail(std::string(a.status().message()));
  if (a->result != static_cast<int32_t>(stats::ControlResult::OK)) {
    return fail(absl::StrFormat("process %d rejected %s: %s", pid, what, a->message));
  }
  if (release) {
    std::printf("%s: unmapped %s bytes, washed %s bytes, RSS %s -> %s (%s)\n", what.c_str(),
                grouped(a->unmapped).c_str(), grouped(a->washed).c_str(),
                grouped(a->before).c_str(), grouped(a->after).c_str(), a->message.c_str());
  } else {
    std::printf("%s: %s -> %s\n", what.c_str(), grouped(a->before).c_str(),
                grouped(a->after).c_str());
  }
  return 0;
}

// gnuplot (Debian's gnuplot-nox) draws a timeline from its data rows (log_plot_data's
// columns); `timed`: the first column is seconds, else a sample index.
int plot(const std::string& rows, bool timed, const std::string& png) {
  char data[] = "/tmp/achunk-dump-XXXXXX";
  const int fd = mkstemp(data);
  if (fd < 0) return fail("cannot create a temporary file for the plot data");
  const bool written = write(fd, rows.data(), rows.size()) == static_cast<ssize_t>(rows.size());
  close(fd);
  std::FILE* gp = written ? popen("gnuplot 2>&1", "w") : nullptr;
  if (gp == nullptr) {
    unlink(data);
    return fail("cannot run gnuplot (install gnuplot-nox)");
  }
  std::fprintf(gp,
               "set terminal pngcairo size 1200,600\nset output '%s'\nset xlabel '%s'\n"
               "set ylabel 'MiB'\nset y2label 'per second'\nset y2tics\nset key outside\n"
               "plot '%s' using 1:2 with lines title 'hold', '' using 1:3 with lines title 'used', "
               "'' using 1:4 with lines title 'cache', '' using 1:5 with lines title 'RSS', "
               "'' using 1:6 axes x1y2 with impulses title 'maps/s', "
               "'' using 1:7 axes x1y2 with impulses title 'unmaps/s'\n",
               png.c_str(), timed ? "seconds" : "sample", data);
  const int status = pclose(gp);
  unlink(data);
  if (status != 0) return fail(absl::StrFormat("gnuplot failed writing %s", png));
  std::printf("wrote %s\n", png.c_str());
  return 0;
}

// Rows every `interval` seconds, `count` times (-1: until killed); with `png`, the rows
// are kept and drawn at the end.
int watch(Region& region, double interval, int64_t count, bool json, const std::string& png) {
  absl::StatusOr<Snapshot> prev = region.snapshot();
  if (!prev.ok()) return fail(std::string(prev.status().message()));
  const absl::Time start = absl::Now();
  absl::Time prev_t = start;
  std::vector<WatchRow> rows;
  for (int64_t i = 0; count < 0 || i < count; ++i) {
    std::this_thread::sleep_for(std::chrono::duration<double>(interval));
    absl::StatusOr<Snapshot> cur = region.snapshot();
    if (!cur.ok()) return fail(std::string(cur.status().message()));
    const absl::Time t = absl::Now();
    WatchRow row = watch_row(*prev, *cur, absl::ToDoubleSeconds(t - prev_t), now_hms());
    row.elapsed_s = absl::ToDoubleSeconds(t - start);
    if (json) {
      std::fputs(format_watch_json(row).c_str(), stdout);
    } else {
      if (i % 20 == 0) std::fputs(watch_header().c_str(), stdout);
      std::fputs(format_watch_row(row).c_str(), stdout);
    }
    std::fflush(stdout);
    if (!png.empty()) rows.push_back(std::move(row));
    prev = std::move(cur);
    prev_t = t;
  }
  return png.empty() ? 0 : plot(watch_plot_data(rows), true, png);
}

int log_mode(const std::string& path, const std::string& png) {
  LogTimeline t;
  std::ifstream file;
  if (path != "-") {
    file.open(path);
    if (!file) return fail(absl::StrFormat("cannot read %s", path));
  }
  std::istream& in = path == "-" ? std::cin : file;
  for (std::string line; std::getline(in, line);) parse_log_line(line, &t);
  std::fputs(format_log_summary(t).c_str(), stdout);
  if (t.samples.empty()) return fail("no [chunk_mgr] lines found");
  const bool timed = t.samples.front().seconds >= 0;
  return png.empty() ? 0 : plot(log_plot_data(t), timed, png);
}

int run(int argc, char** argv) {
  absl::SetProgramUsageMessage(usage_text());
  // Ours, not abseil's: its --help lists only flags defined in a file named after the
  // program, so it would find none.
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--help" || a == "-help" || a == "-h") {
      std::fputs(usage_text().c_str(), stdout);
      return 0;
    }
  }
  // "--release" without a value means "--release=expired".
  std::vector<char*> args(argv, argv + argc);
  std::string release_default = "--release=expired";
  for (size_t i = 1; i < args.size(); ++i) {
    if (std::string(args[i]) != "--release") continue;
    const bool has_value = i + 1 < args.size() && (std::string(args[i + 1]) == "expired" ||
                                                   std::string(args[i + 1]) == "all");
    if (!has_value) args[i] = release_default.data();
  }
  std::vector<char*> pos = absl::ParseCommandLine(static_cast<int>(args.size()), args.data());
  if (absl::GetFlag(FLAGS_list)) return list(absl::GetFlag(FLAGS_force));
  if (!absl::GetFlag(FLAGS_log).empty()) {
    return log_mode(absl::GetFlag(FLAGS_log), absl::GetFlag(FLAGS_plot));
  }
  if (pos.size() < 2) return fail("no PID given (see --help)");
  pid_t pid = 0;
  if (!absl::SimpleAtoi(pos[1], &pid) || pid <= 0) {
    return fail(absl::StrFormat("not a process id: '%s'", pos[1]));
  }
  const bool watching = absl::GetFlag(FLAGS_watch);
  double interval = 1;
  int64_t count = -1;
  if (pos.size() > 2 && (!watching || !absl::SimpleAtod(pos[2], &interval) || interval <= 0)) {
    return fail(absl::StrFormat("unexpected argument '%s'", pos[2]));
  }
  if (pos.size() > 3 && (!absl::SimpleAtoi(pos[3], &count) || count <= 0)) {
    return fail(absl::StrFormat("bad COUNT '%s'", pos[3]));
  }
  if (pos.size() > 4) return fail(absl::StrFormat("unexpected argument '%s'", pos[4]));
  const std::string png = absl::GetFlag(FLAGS_plot);
  if (!png.empty() && (!watching || count < 0)) {
    return fail("--plot wants --log FILE, or --watch PID INTERVAL COUNT");
  }

  absl::Duration timeout;
  if (!absl::ParseDuration(absl::GetFlag(FLAGS_timeout), &timeout) ||
      timeout < absl::ZeroDuration()) {
    return fail(
        absl::StrFormat("bad --timeout '%s' (use e.g. 5s or 300ms)", absl::GetFlag(FLAGS_timeout)));
  }
  absl::StatusOr<std::unique_ptr<Region>> region =
      Region::open_pid(pid, absl::GetFlag(FLAGS_force));
  if (!region.ok()) return fail(std::string(region.status().message()));

  const std::string set = absl::GetFlag(FLAGS_set);
  if (!set.empty()) {
    const size_t eq = set.find('=');
    if (eq == std::string::npos || eq == 0) return fail("--set wants NAME=VALUE");
    const std::string name = set.substr(0, eq);
    return answer(
        (*region)->request(stats::ControlOp::SET_OPTION, name, set.substr(eq + 1), timeout), pid,
        name, false);
  }
  const std::string release = absl::GetFlag(FLAGS_release);
  if (!release.empty()) {
    if (release != "expired" && release != "all") return fail("--release wants expired or all");
    const auto op =
        release == "all" ? stats::ControlOp::RELEASE_ALL : stats::ControlOp::RELEASE_EXPIRED;
    return answer((*region)->request(op, "", "", timeout), pid, "release " + release, true);
  }
  if (watching) return watch(**region, interval, count, absl::GetFlag(FLAGS_json), png);
  absl::StatusOr<Snapshot> s = (*region)->snapshot();
  if (!s.ok()) return fail(std::string(s.status().message()));
  std::fputs((absl::GetFlag(FLAGS_json) ? format_json(*s) : format_text(*s)).c_str(), stdout);
  return 0;
}

}  // namespace
}  // namespace achunk::dump

int main(int argc, char** argv) {
  return achunk::dump::run(argc, argv);
}
