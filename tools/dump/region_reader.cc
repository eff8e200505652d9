#include "tools/dump/region_reader.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"

namespace achunk::dump {

namespace {

using stats::Header;

bool in_bounds(uint64_t offset, uint64_t len, uint64_t size) {
  return offset <= size && len <= size - offset;
}

absl::Status bad(const std::string& why) {
  return absl::FailedPreconditionError(why);
}

std::string read_text(const std::string& path) {
  std::ifstream in(path);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// "/memfd:achunk-stats (deleted)"
bool is_region_link(const std::string& target) {
  return target.rfind(std::string("/memfd:") + stats::MEMFD_NAME, 0) == 0;
}

// Descriptors of `pid` that name a stats region, and the inodes mapped in its maps.
std::vector<int> region_fds(pid_t pid, int* err) {
  std::vector<int> fds;
  const std::string dir = absl::StrFormat("/proc/%d/fd", pid);
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) {
    *err = errno;
    return fds;
  }
  // The directory lists for its owner, but each link reads only for a reader that may
  // ptrace the process (one lacking its capabilities may not).
  int denied = 0;
  while (dirent* e = readdir(d)) {
    int fd = 0;
    if (!absl::SimpleAtoi(e->d_name, &fd)) continue;
    char target[256];
    const std::string link = dir + "/" + e->d_name;
    const ssize_t n = readlink(link.c_str(), target, sizeof(target) - 1);
    if (n <= 0) {
      if (errno == EACCES || errno == EPERM) denied = errno;
      continue;
    }
    target[n] = '\0';
    if (is_region_link(target)) fds.push_back(fd);
  }
  closedir(d);
  *err = fds.empty() ? denied : 0;
  return fds;
}

// Whether the process has any permitted capability (CapPrm in /proc/PID/status).
bool holds_capabilities(pid_t pid) {
  for (absl::string_view line :
       absl::StrSplit(read_text(absl::StrFormat("/proc/%d/status", pid)), '\n')) {
    if (absl::ConsumePrefix(&line, "CapPrm:")) {
      line = absl::StripAsciiWhitespace(line);
      return !line.empty() && line.find_first_not_of('0') != absl::string_view::npos;
    }
  }
  return false;
}

std::set<uint64_t> mapped_region_inodes(pid_t pid) {
  std::set<uint64_t> inodes;
  for (absl::string_view line :
       absl::StrSplit(read_text(absl::StrFormat("/proc/%d/maps", pid)), '\n')) {
    if (line.find(stats::MEMFD_NAME) == absl::string_view::npos) continue;
    // address perms offset dev inode path
    std::vector<absl::string_view> parts = absl::StrSplit(line, ' ', absl::SkipEmpty());
    uint64_t inode = 0;
    if (parts.size() >= 5 && absl::SimpleAtoi(parts[4], &inode)) inodes.insert(inode);
  }
  return inodes;
}

}  // namespace

int64_t Snapshot::get(const std::string& name, int64_t missing) const {
  const Field* f = find(name);
  return f != nullptr && !f->is_string ? f->value : missing;
}

const Field* Snapshot::find(const std::string& name) const {
  for (const Field& f : fields) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

absl::StatusOr<Snapshot> parse_region(const unsigned char* b, size_t size) {
  if (size < sizeof(Header)) return bad(absl::StrFormat("region too small (%d bytes)", size));
  Header h;
  std::memcpy(&h, b, sizeof(h));
  if (h.magic != stats::MAGIC) {
    return bad(absl::StrFormat("wrong magic 0x%016x: not an achunk stats region", h.magic));
  }
  if (h.major != stats::MAJOR) {
    return bad(absl::StrFormat("unknown region major version %d (this achunk-dump reads %d)",
                               h.major, stats::MAJOR));
  }
  if (h.header_size < sizeof(Header) || h.header_size > size) {
    return bad(absl::StrFormat("header size %d out of bounds", h.header_size));
  }
  if (h.region_size > size) {
    return bad(
        absl::StrFormat("region size %d exceeds the mapping (%d bytes)", h.region_size, size));
  }
  size = static_cast<size_t>(h.region_size);
  if (!in_bounds(h.field_offset, uint64_t{h.field_count} * sizeof(stats::FieldDesc), size)) {
    return bad(absl::StrFormat("field table (offset %d, %d fields) out of bounds", h.field_offset,
                               h.field_count));
  }
  if (!in_bounds(h.data_offset, h.data_size, size)) {
    return bad(absl::StrFormat("data section (offset %d, %d bytes) out of bounds", h.data_offset,
                               h.data_size));
  }
  if (h.control_size < sizeof(stats::Control) ||
      !in_bounds(h.control_offset, sizeof(stats::Control), size)) {
    return bad(absl::StrFormat("control slot (offset %d) out of bounds", h.control_offset));
  }
  Snapshot s;
  s.major = h.major;
  s.minor = h.minor;
  s.pid = h.pid;
  s.start_time = h.start_time;
  s.generation = h.generation;
  s.heartbeat_ns = h.heartbeat_ns;
  s.refreshes = h.refreshes;
  for (uint32_t i = 0; i < h.field_count; ++i) {
    stats::FieldDesc d;
    std::memcpy(&d, b + h.field_offset + i * sizeof(d), sizeof(d));
    if (std::memchr(d.name, '\0', sizeof(d.name)) == nullptr) {
      return bad(absl::StrFormat("field %d: name not terminated", i));
    }
    if (d.offset < h.data_offset || !in_bounds(d.offset - h.data_offset, d.size, h.data_size)) {
      return bad(absl::StrFormat("field %s: offset %d out of bounds", d.name, d.offset));
    }
    Field f;
    f.name = d.name;
    f.unit = d.unit;
    if (d.type == stats::FieldType::I64) {
      if (d.size != 8) return bad(absl::StrFormat("field %s: size %d, not 8", d.name, d.size));
      std::memcpy(&f.value, b + d.offset, 8);
    } else if (d.type == stats::FieldType::STR) {
      const char* p = reinterpret_cast<const char*>(b + d.offset);
      f.is_string = true;
      f.text.assign(p, strnlen(p, d.size));
    } else {
      continue;  // a type added by a later minor version
    }
    s.fields.push_back(std::move(f));
  }
  const int64_t count = s.get("ctx_count", 0);
  if (count < 0 || count > h.ctx_capacity || h.ctx_stride < stats::CTX_ROW_SIZE_1_0 ||
      !in_bounds(h.ctx_offset, uint64_t{h.ctx_capacity} * h.ctx_stride, size)) {
    return bad(absl::StrFormat("ctx table (offset %d, %d of %d rows) out of bounds", h.ctx_offset,
                               count, h.ctx_capacity));
  }
  for (int64_t i = 0; i < count; ++i) {
    // An older row is shorter: what it lacks stays unknown (-1).
    stats::CtxRow r;
    r.used = r.free_spans = r.washed = r.free_resident = r.usage_hold = -1;
    r.spans = stats::UNKNOWN_SPANS;
    std::memcpy(&r, b + h.ctx_offset + i * h.ctx_stride, std::min<size_t>(h.ctx_stride, sizeof(r)));
    s.ctxs.push_back(CtxRow{r.tenant_id, r.ctx_id,
                            std::string(r.ctx_name, strnlen(r.ctx_name, sizeof(r.ctx_name))),
                            r.hold, r.limit, r.tenant_hold, r.tenant_limit, r.used, r.free_spans,
                            r.washed, r.free_resident, r.usage_hold, r.spans});
  }
  // A 1.0 region has no label_count field and zeroed label fields in the header.
  const int64_t nlabels = s.get("label_count", 0);
  if (nlabels < 0 || nlabels > h.label_capacity ||
      (nlabels > 0 && h.label_stride < sizeof(stats::LabelRow)) ||
      !in_bounds(h.label_offset, uint64_t{h.label_capacity} * h.label_stride, size)) {
    return bad(absl::StrFormat("label table (offset %d, %d of %d rows) out of bounds",
                               h.label_offset, nlabels, h.label_capacity));
  }
  for (int64_t i = 0; i < nlabels; ++i) {
    stats::LabelRow r;
    std::memcpy(&r, b + h.label_offset + i * h.label_stride, sizeof(r));
    s.labels.push_back(LabelRow{
        r.tenant_id, r.ctx_id, std::string(r.ctx_name, strnlen(r.ctx_name, sizeof(r.ctx_name))),
        std::string(r.label, strnlen(r.label, sizeof(r.label))), r.hold, r.used, r.count});
  }
  return s;
}

absl::StatusOr<std::unique_ptr<Region>> Region::open_pid(pid_t pid, bool force) {
  struct stat st;
  const std::string proc = absl::StrFormat("/proc/%d", pid);
  if (pid <= 0 || stat(proc.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrFormat("no such process: %d", pid));
  }
  if (st.st_uid != geteuid() && !force) {
    return absl::PermissionDeniedError(
        absl::StrFormat("process %d belongs to uid %d, not to you (uid %d): refused (--force "
                        "reads it anyway)",
                        pid, st.st_uid, geteuid()));
  }
  int err = 0;
  const std::vector<int> fds = region_fds(pid, &err);
  if (err != 0) {
    // Same user, yet refused: the kernel opens a process's descriptors only to a reader
    // that holds its capabilities (mariadb.service gives mariadbd CAP_IPC_LOCK).
    const std::string why =
        st.st_uid == geteuid() && holds_capabilities(pid)
            ? " (it holds capabilities your user lacks, as mariadbd under mariadb.service "
              "holds CAP_IPC_LOCK: read it as root with --force)"
            : "";
    return absl::PermissionDeniedError(
        absl::StrFormat("cannot list /proc/%d/fd: %s%s", pid, std::strerror(err), why));
  }
  if (fds.empty()) {
    // A forked child of the drop-in malloc makes its region only once it is old enough.
    if (read_text(absl::StrFormat("/proc/%d/maps", pid)).find("libachunk_malloc") !=
        std::string::npos) {
      return absl::NotFoundError(absl::StrFormat(
          "process %d has no achunk stats region yet: it runs libachunk_malloc.so, and a forked "
          "child makes its region once it has lived release_interval_ms (1 s by default) since "
          "its first allocator call and calls it again, or holds 16 MiB (or stats_region is off)",
          pid));
    }
    return absl::NotFoundError(absl::StrFormat(
        "process %d has no achunk stats region (not using achunk, or stats_region is off)", pid));
  }
  const std::set<uint64_t> mapped = mapped_region_inodes(pid);
  int chosen = -1;
  for (int fd : fds) {
    const int f = open(absl::StrFormat("/proc/%d/fd/%d", pid, fd).c_str(), O_RDWR | O_CLOEXEC);
    if (f < 0) continue;
    struct stat fst;
    if (fstat(f, &fst) == 0 && (mapped.empty() || mapped.count(fst.st_ino) > 0)) {
      if (chosen >= 0) close(chosen);
      chosen = f;
      if (!mapped.empty()) break;
    } else {
      close(f);
    }
  }
  if (chosen < 0) {
    const int open_errno = errno;
    struct stat rst;
    std::string why;
    // A region made before the process changed its user (a server started as root that
    // drops to mysql) still belongs to the first user.
    if (stat(absl::StrFormat("/proc/%d/fd/%d", pid, fds.front()).c_str(), &rst) == 0 &&
        rst.st_uid != st.st_uid) {
      why = absl::StrFormat(
          " (the region belongs to uid %d, which made it before the process "
          "became uid %d: read it as uid %d, or as root with --force)",
          rst.st_uid, st.st_uid, rst.st_uid);
    }
    return absl::PermissionDeniedError(
        absl::StrFormat("cannot open the stats region of process "
                        "%d: %s%s",
                        pid, std::strerror(open_errno), why));
  }
  struct stat fst;
  fstat(chosen, &fst);
  const size_t size = static_cast<size_t>(fst.st_size);
  void* p = size >= sizeof(Header)
                ? mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, chosen, 0)
                : MAP_FAILED;
  close(chosen);
  if (p == MAP_FAILED) {
    return absl::FailedPreconditionError(
        absl::StrFormat("cannot map the stats region of process %d (%d bytes)", pid, size));
  }
  return std::unique_ptr<Region>(new Region(static_cast<unsigned char*>(p), size, pid, true));
}

std::unique_ptr<Region> Region::over(unsigned char* bytes, size_t size, pid_t pid) {
  return std::unique_ptr<Region>(new Region(bytes, size, pid, false));
}

Region::~Region() {
  if (owned_) munmap(bytes_, size_);
}

absl::StatusOr<Snapshot> Region::snapshot(int max_tries) const {
  if (size_ < sizeof(Header)) return bad(absl::StrFormat("region too small (%d bytes)", size_));
  uint64_t* seq = reinterpret_cast<uint64_t*>(bytes_ + offsetof(Header, seq));
  std::vector<unsigned char> copy(size_);
  for (int i = 0; i < max_tries; ++i) {
    const uint64_t s1 = __atomic_load_n(seq, __ATOMIC_ACQUIRE);
    if ((s1 & 1) != 0) {
      sched_yield();
      continue;
    }
    std::memcpy(copy.data(), bytes_, size_);
    // The copy's loads stay above this release read-modify-write (no fence: the
    // sanitizers do not model fences).
    if (__atomic_fetch_add(seq, 0, __ATOMIC_ACQ_REL) != s1) continue;
    absl::StatusOr<Snapshot> s = parse_region(copy.data(), copy.size());
    if (!s.ok() || pid_ <= 0) return s;
    if (s->generation == 0) {
      return bad(absl::StrFormat("stale region: process %d has exited (generation 0)", pid_));
    }
    if (s->pid != pid_) {
      return bad(absl::StrFormat("stale region: it names pid %d, not %d", s->pid, pid_));
    }
    const int64_t start = process_start_time(pid_);
    if (start >= 0 && s->start_time != start) {
      return bad(absl::StrFormat("stale region: its start time %d is not process %d's (%d)",
                                 s->start_time, pid_, start));
    }
    return s;
  }
  return bad(absl::StrFormat("torn read: the region kept changing over %d tries", max_tries));
}

absl::StatusOr<ControlAnswer> Region::request(stats::ControlOp op, const std::string& option,
                                              const std::string& value, absl::Duration timeout) {
  absl::StatusOr<Snapshot> s = snapshot();
  if (!s.ok()) return s.status();
  stats::Control probe;
  if (option.size() >= sizeof(probe.option) || value.size() >= sizeof(probe.value)) {
    return absl::InvalidArgumentError("option name or value too long");
  }
  uint32_t control_offset = 0;
  std::memcpy(&control_offset, bytes_ + offsetof(Header, control_offset), sizeof(control_offset));
  auto* c = reinterpret_cast<stats::Control*>(bytes_ + control_offset);
  const uint64_t seq = __atomic_load_n(&c->req_seq, __ATOMIC_ACQUIRE) + 1;
  c->op = static_cast<uint32_t>(op);
  std::memset(c->option, 0, sizeof(c->option));
  std::memset(c->value, 0, sizeof(c->value));
  std::memcpy(c->option, option.data(), option.size());
  std::memcpy(c->value, value.data(), value.size());
  __atomic_store_n(&c->req_seq, seq, __ATOMIC_RELEASE);
  const absl::Time deadline = absl::Now() + timeout;
  while (__atomic_load_n(&c->resp_seq, __ATOMIC_ACQUIRE) != seq) {
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrFormat(
          "process %d did not answer within %s: it made no allocator call and runs no "
          "housekeeping thread (start it with release_interval_ms > 0, e.g. "
          "ACHUNK_CONF=release_interval_ms:1000)",
          pid_, absl::FormatDuration(timeout)));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ControlAnswer a;
  a.result = c->result;
  a.message.assign(c->message, strnlen(c->message, sizeof(c->message)));
  a.before = c->before;
  a.after = c->after;
  a.unmapped = c->unmapped;
  a.washed = c->washed;
  return a;
}

int64_t process_start_time(pid_t pid) {
  const std::string stat = read_text(absl::StrFormat("/proc/%d/stat", pid));
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return -1;
  std::vector<absl::string_view> parts =
      absl::StrSplit(absl::string_view(stat).substr(close + 1), ' ', absl::SkipEmpty());
  // parts[0] is field 3 (state), so field 22 is parts[19].
  int64_t v = -1;
  if (parts.size() < 20 || !absl::SimpleAtoi(parts[19], &v)) return -1;
  return v;
}

int64_t process_rss(pid_t pid) {
  std::vector<std::string> parts =
      absl::StrSplit(read_text(absl::StrFormat("/proc/%d/statm", pid)), ' ');
  int64_t pages = 0;
  if (parts.size() < 2 || !absl::SimpleAtoi(parts[1], &pages)) return -1;
  return pages * sysconf(_SC_PAGESIZE);
}

ProcessScan scan_processes(bool every_user) {
  ProcessScan scan;
  DIR* d = opendir("/proc");
  if (d == nullptr) return scan;
  const uid_t me = geteuid();
  while (dirent* e = readdir(d)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(e->d_name, &pid)) continue;
    struct stat st;
    if (stat(absl::StrFormat("/proc/%d", pid).c_str(), &st) != 0) continue;
    int err = 0;
    const bool has_region = !region_fds(pid, &err).empty();
    if (st.st_uid != me && err != 0) {
      ++scan.skipped_unreadable;
    } else if (err != 0 && holds_capabilities(pid)) {
      scan.unreadable_own.push_back({pid, st.st_uid});
    } else if (has_region) {
      (st.st_uid == me || every_user ? scan.listed : scan.skipped_with_region)
          .push_back({pid, st.st_uid});
    }
  }
  closedir(d);
  auto by_pid = [](const ProcessScan::Process& a, const ProcessScan::Process& b) {
    return a.pid < b.pid;
  };
  std::sort(scan.listed.begin(), scan.listed.end(), by_pid);
  std::sort(scan.skipped_with_region.begin(), scan.skipped_with_region.end(), by_pid);
  return scan;
}

std::string user_name(uid_t uid) {
  passwd pw;
  passwd* found = nullptr;
  char buf[1024];
  if (getpwuid_r(uid, &pw, buf, sizeof(buf), &found) == 0 && found != nullptr) {
    return found->pw_name;
  }
  return absl::StrFormat("%d", uid);
}

}  // namespace achunk::dump
