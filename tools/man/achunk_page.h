// achunk-gen-man: the manual page achunk(3). Its OPTIONS section is rendered from the
// base layer's OPTION_TABLE and its C API lines are checked against the public headers at
// compile time, so the page cannot fall behind the code. Depends on
// achunk/base/options.h, include/achunk/ and roff.h.
#pragma once

#include <string>

namespace achunk::man {

// Where an installed achunk lives (the build's GNUInstallDirs, absolute), for the page's
// SYNOPSIS and FILES.
struct InstallPaths {
  std::string version;     // "0.1.0"
  std::string libdir;      // "/usr/lib/x86_64-linux-gnu"
  std::string includedir;  // "/usr/include"
  std::string bindir;      // "/usr/bin"
  std::string datadir;     // "/usr/share"
};

// achunk(3) as roff.
std::string achunk_page(const InstallPaths& paths);

}  // namespace achunk::man
