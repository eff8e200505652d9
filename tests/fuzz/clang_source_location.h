// Forced into the clang fuzz build (scripts/fuzz.sh): libstdc++ 12's <source_location>
// needs __builtin_source_location, which clang 14 lacks, so std::source_location is
// supplied here from the older __builtin_FILE/LINE/FUNCTION.
#pragma once

#if __cplusplus > 201703L && defined(__clang__) && !__has_builtin(__builtin_source_location) && \
    !defined(_GLIBCXX_SRCLOC)
#define _GLIBCXX_SRCLOC 1
namespace std {
struct source_location {
  static consteval source_location current(const char* file = __builtin_FILE(),
                                           const char* function = __builtin_FUNCTION(),
                                           unsigned line = __builtin_LINE()) noexcept {
    source_location s;
    s.file_ = file;
    s.function_ = function;
    s.line_ = line;
    return s;
  }
  constexpr const char* file_name() const noexcept { return file_; }
  constexpr const char* function_name() const noexcept { return function_; }
  constexpr unsigned line() const noexcept { return line_; }
  constexpr unsigned column() const noexcept { return 0; }
  const char* file_ = "";
  const char* function_ = "";
  unsigned line_ = 0;
};
}  // namespace std
#endif
