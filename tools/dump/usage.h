// achunk-dump's usage: every mode, what it prints, who may read what, exit codes, kept
// once as data and rendered twice, as the --help text and as the manual page
// achunk-dump(1), so the two cannot drift. Depends on nothing.
#pragma once

#include <string>
#include <string_view>

namespace achunk::dump {

// The whole text printed by `achunk-dump --help`, ending in a newline.
std::string usage_text();

// The same content as a roff page for section 1 (NAME, SYNOPSIS, DESCRIPTION, MODES,
// OPTIONS, WHO MAY READ WHAT, EXIT STATUS, SEE ALSO); `source` fills the page footer
// (the package and its version).
std::string usage_man(std::string_view source = "achunk");

}  // namespace achunk::dump
