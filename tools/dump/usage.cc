#include "tools/dump/usage.h"

#include "tools/man/roff.h"

namespace achunk::dump {

namespace {

struct Mode {
  const char* synopsis;
  const char* description;
};

struct Flag {
  const char* flag;
  const char* description;
};

struct ExitCode {
  const char* code;
  const char* meaning;
};

constexpr const char* PURPOSE = "read and retune the achunk allocator of a running process";
constexpr const char* PURPOSE_MORE =
    "from outside, through the stats region it publishes (stats_region, on in "
    "libachunk_malloc.so).";

constexpr Mode MODES[] = {
    {"achunk-dump PID",
     "The dump: [chunk_mgr] and [CHUNK_MGR] (OceanBase's chunk cache lines), [THREAD_STATES], "
     "[MEMORY] (hold, used, limit and free spans of each tenant and ctx), [TOP_LABELS] (the 16 "
     "labels holding most) and [OPTIONS] (every option's current value)."},
    {"achunk-dump --json PID", "The same as one JSON document."},
    {"achunk-dump --watch PID [INTERVAL [COUNT]]",
     "One row every INTERVAL seconds (default 1), COUNT times (default: until interrupted): the "
     "time, RSS, hold, used, cache, cache resident, cache cap and limit in MiB; chunk maps, "
     "unmaps and expired unmaps per second; the cache hit % and the count of cached 2~MiB "
     "chunks. With --json, one JSON object per row."},
    {"achunk-dump --watch PID INTERVAL COUNT --plot OUT.png",
     "The same rows, then their timeline drawn into OUT.png (needs gnuplot)."},
    {"achunk-dump --set NAME=VALUE PID",
     "Sets option NAME in the process (sizes accept K, M, G and T) and prints \"NAME: OLD -> "
     "NEW\". Shrinking memory_chunk_cache_size unmaps the surplus at once."},
    {"achunk-dump --release [expired|all] PID",
     "expired (the default): unmaps the cached chunks idle past chunk_cache_ttl_ms and washes "
     "the free spans idle past span_idle_ms; all: unmaps the whole chunk cache and washes every "
     "free span. Prints the bytes unmapped and washed and RSS before and after."},
    {"achunk-dump --list",
     "The processes of your user that have a stats region: pid, command, user, hold, cache and "
     "RSS in bytes. Then, on stderr, how many processes of other users it skipped, which of "
     "your user's it cannot look into, and how to read them. With --force (as root), every "
     "user's processes."},
    {"achunk-dump --log FILE|- [--plot OUT.png]",
     "Summarises the [chunk_mgr] lines of a log (stats_interval_ms's, or OceanBase's "
     "observer.log), and draws their timeline into OUT.png."},
    {"achunk-dump --help", "Prints the usage: every mode, option and exit status; exit status 0."},
};

constexpr Flag FLAGS[] = {
    {"--json", "JSON instead of text (the dump, --watch rows)."},
    {"--timeout=DURATION",
     "how long --set and --release wait for the process to answer (default 5s; 300ms, 1m, "
     "...). The process answers from its housekeeping thread (release_interval_ms) or its next "
     "chunk-level call."},
    {"--force", "reads a process of another user, as root (see who may read what, below)."},
};

constexpr const char* ACCESS_RULE =
    "Only the process's own user and root can open its region; without --force even root is "
    "refused, so a look at another user's server is always deliberate. Either run the tool as "
    "the server's user (sudo -u postgres achunk-dump --list) or as root with --force. A "
    "server that holds capabilities its user's shell lacks (mariadb.service gives mariadbd "
    "CAP_IPC_LOCK) is readable only as root, with --force: the kernel opens a process's "
    "descriptors only to a reader holding its capabilities. A server started as root that "
    "becomes another user later may have made its region as root; the tool then says so: "
    "read it as root with --force.";

constexpr ExitCode EXIT_CODES[] = {
    {"0", "the request was done."},
    {"1",
     "it was not, with one line on stderr saying why: no such process, no stats region (not "
     "achunk, stats_region off, or a forked child too young for one), another user's process "
     "without --force, a process holding capabilities you lack, a stale or damaged "
     "region, a value the process rejected, no answer within --timeout, or a bad command "
     "line."},
};

// The --help text's width, as a terminal of 100 columns shows it with room to spare.
constexpr size_t WIDTH = 92;

// Appends `text` filled to WIDTH columns: the first line after `first` (padded to
// `indent`), the others after `indent` spaces. Words are never split, nor words joined by
// a tie (man::TIE), which prints as a space.
void fill(std::string* out, std::string_view text, size_t indent, std::string_view first) {
  std::string line(first);
  if (line.size() < indent) line.append(indent - line.size(), ' ');
  bool empty = true;
  size_t i = 0;
  while (i < text.size()) {
    size_t end = text.find(' ', i);
    if (end == std::string_view::npos) end = text.size();
    const std::string_view word = text.substr(i, end - i);
    if (!empty && line.size() + 1 + word.size() > WIDTH) {
      *out += line + "\n";
      line.assign(indent, ' ');
      empty = true;
    }
    if (!empty) line += ' ';
    for (const char c : word) line += c == man::TIE ? ' ' : c;
    empty = false;
    i = end + 1;
  }
  *out += line + "\n";
}

}  // namespace

std::string usage_text() {
  std::string out;
  fill(&out, std::string("achunk-dump: ") + PURPOSE + " " + PURPOSE_MORE, 0, "");
  out += "\nUsage:\n";
  for (const Mode& m : MODES) {
    out += std::string("  ") + m.synopsis + "\n";
    fill(&out, m.description, 6, "");
  }
  out += "\nOptions:\n";
  for (const Flag& f : FLAGS) fill(&out, f.description, 21, std::string("  ") + f.flag + " ");
  out += "\nWho may read what:\n";
  fill(&out, ACCESS_RULE, 2, "");
  out += "\nExit status:\n";
  for (const ExitCode& e : EXIT_CODES) {
    fill(&out, e.meaning, 5, std::string("  ") + e.code + "  ");
  }
  return out;
}

std::string usage_man(std::string_view source) {
  using man::bold;
  using man::roff_text;
  using man::synopsis;
  std::string out;
  // .nh and .ad l: no hyphenation, ragged right, so flags and option names stay whole.
  out += ".TH ACHUNK-DUMP 1 \"\" \"" + std::string(source) + "\" \"achunk manual\"\n.nh\n.ad l\n";
  out += ".SH NAME\nachunk-dump \\- " + roff_text(PURPOSE) + "\n";
  out += ".SH SYNOPSIS\n.nf\n";
  for (const Mode& m : MODES) out += synopsis(m.synopsis) + "\n";
  out += ".fi\n";
  out += ".SH DESCRIPTION\n" + bold("achunk-dump") + ": " + roff_text(PURPOSE) + " " +
         roff_text(PURPOSE_MORE) + "\n";
  out += ".SH MODES\n";
  for (const Mode& m : MODES) {
    out += ".TP\n" + synopsis(m.synopsis) + "\n" + roff_text(m.description) + "\n";
  }
  out += ".SH OPTIONS\n";
  for (const Flag& f : FLAGS) {
    out += ".TP\n" + synopsis(f.flag) + "\n" + roff_text(f.description) + "\n";
  }
  out += ".SH \"WHO MAY READ WHAT\"\n" + roff_text(ACCESS_RULE) + "\n";
  out += ".SH \"EXIT STATUS\"\n";
  for (const ExitCode& e : EXIT_CODES) {
    out += ".TP\n" + bold(e.code) + "\n" + roff_text(e.meaning) + "\n";
  }
  out += ".SH \"SEE ALSO\"\n.BR achunk (3),\n.BR gnuplot (1)\n";
  return out;
}

}  // namespace achunk::dump
