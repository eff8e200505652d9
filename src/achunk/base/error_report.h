// Base layer: reporting of caller errors the allocator detects (a free of something it
// never handed out, a double free, an overwritten canary). By default the report goes to stderr and
// the process aborts, as glibc does; tests install a handler that records it instead. Depends on
// nothing else inside achunk.
#pragma once

namespace achunk {

// DEALLOC_MISMATCH: freed by another call family than the one that allocated it (free of
// operator new's object, delete of new[]'s, ...).
enum class ErrorKind : int { INVALID_FREE, DOUBLE_FREE, CORRUPTION, DEALLOC_MISMATCH };

// `message` is a complete line without the newline; it lives only during the call.
using ErrorHandler = void (*)(ErrorKind kind, const void* ptr, const char* message);

// Installs `handler` (nullptr restores the default) and returns the previous one.
ErrorHandler set_error_handler(ErrorHandler handler);

// Formats and delivers a report. Returns only if the installed handler returns.
void report_error(ErrorKind kind, const void* ptr, const char* detail);

// Writes `message` and a newline to stderr with write(2): no stdio, no allocation, so it
// is safe while the heap is broken or being initialised. Long lines are cut at 510 bytes.
void write_stderr_line(const char* message);

}  // namespace achunk
