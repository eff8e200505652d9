// Manual pages: text made safe for roff (man(7)), so a sentence written once for --help
// or an options table prints as written in a page. Shared by achunk-dump's usage
// (tools/dump/usage.cc) and achunk-gen-man (tools/man/). Depends on the standard library
// only.
#pragma once

#include <string>
#include <string_view>

namespace achunk::man {

// The texts write "2~MiB" where a line must not break: a tie, as in TeX. --help prints
// it as a space, a page as roff's unbreakable space.
inline constexpr char TIE = '~';

// `text` as roff text: backslashes as \e; a dash that starts a word (an option, a
// negative number, "-> NEW") as \-, so it prints as the minus a reader types, while a
// hyphen inside a word stays a hyphen; a tie as "\ "; \& before a leading '.' or '\'' so
// the line is not taken for a request.
inline std::string roff_text(std::string_view text) {
  std::string out;
  out.reserve(text.size() + 8);
  if (!text.empty() && (text.front() == '.' || text.front() == '\'')) out += "\\&";
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '\\') {
      out += "\\e";
    } else if (c == TIE) {
      out += "\\ ";
    } else if (c == '-' && (i == 0 || std::string_view(" ([|=-\"").find(text[i - 1]) !=
                                          std::string_view::npos)) {
      out += "\\-";
    } else {
      out += c;
    }
  }
  return out;
}

inline std::string bold(std::string_view text) {
  return "\\fB" + roff_text(text) + "\\fR";
}

inline std::string italic(std::string_view text) {
  return "\\fI" + roff_text(text) + "\\fR";
}

// A command line (or a lone flag) as a synopsis shows it: the command and its flags bold,
// the values a reader supplies (words that start upper case: PID, NAME=VALUE, OUT.png, a
// flag's =DURATION) italic, the brackets and bars of optional parts plain.
inline std::string synopsis(std::string_view line) {
  std::string out;
  size_t i = 0;
  bool first = true;
  while (i < line.size()) {
    const char c = line[i];
    if (c == ' ' || c == '[' || c == ']' || c == '|') {
      out += c;
      ++i;
      continue;
    }
    size_t end = line.find_first_of(" []|", i);
    if (end == std::string_view::npos) end = line.size();
    const std::string_view word = line.substr(i, end - i);
    const size_t eq = word.find('=');
    if (word.front() == '-' && eq != std::string_view::npos) {
      out += bold(word.substr(0, eq)) + "=" + italic(word.substr(eq + 1));
    } else if (word.front() == '-' || first) {
      out += bold(word);
    } else if (word.front() >= 'A' && word.front() <= 'Z') {
      out += italic(word);
    } else {
      out += roff_text(word);
    }
    first = false;
    i = end;
  }
  return out;
}

}  // namespace achunk::man
