// achunk-gen-man: writes one of achunk's manual pages at build time, achunk(3) from the
// options table and the public headers, achunk-dump(1) from the tool's usage data, so
// neither page can drift from the code. Not installed. Depends on achunk_page.h and
// tools/dump/usage.h.
// Usage: achunk-gen-man achunk.3|achunk-dump.1 OUT
#include <cstdio>
#include <string>

#include "tools/dump/usage.h"
#include "tools/man/achunk_page.h"

int main(int argc, char** argv) {
  const std::string page = argc == 3 ? argv[1] : "";
  std::string text;
  if (page == "achunk.3") {
    // The build's GNUInstallDirs (tools/man/CMakeLists.txt), so the page names the paths
    // this build installs to.
    text = achunk::man::achunk_page({ACHUNK_MAN_VERSION, ACHUNK_MAN_LIBDIR, ACHUNK_MAN_INCLUDEDIR,
                                     ACHUNK_MAN_BINDIR, ACHUNK_MAN_DATADIR});
  } else if (page == "achunk-dump.1") {
    text = achunk::dump::usage_man("achunk " ACHUNK_MAN_VERSION);
  } else {
    std::fputs("usage: achunk-gen-man achunk.3|achunk-dump.1 OUT\n", stderr);
    return 2;
  }
  std::FILE* out = std::fopen(argv[2], "w");
  if (out == nullptr) {
    std::perror(argv[2]);
    return 1;
  }
  const bool written = std::fputs(text.c_str(), out) >= 0;
  if (std::fclose(out) != 0 || !written) {
    std::perror(argv[2]);
    return 1;
  }
  return 0;
}
