// achunk-dump's usage text: every mode, what it prints, who may read what, exit codes.
// One source for --help (and for the manual page built from it). Depends on nothing.
#pragma once

namespace achunk::dump {

// The whole text printed by `achunk-dump --help`, ending in a newline.
const char* usage_text();

}  // namespace achunk::dump
