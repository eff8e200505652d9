// achunk's public C++ API over the process-wide chunk manager: chunk allocation, the
// option table (by name, at run time) and the [chunk_mgr] dump. The process-wide
// objects behind it are created on first use and configured from ACHUNK_CONF.
// Depends only on the standard library; the implementation lives in src/achunk/.
#pragma once

#include <cstdint>

namespace achunk {

// A 2 MiB-aligned chunk with room for `size` payload bytes; returns the payload or
// nullptr (see last_failure_message()).
void* chunk_alloc(int64_t size);
// Returns a payload from chunk_alloc to the chunk cache.
void chunk_free(void* payload);

// Sets an option by name from its text form ("memory_chunk_cache_size", "2M") and
// applies it at once. On a bad name or value returns false, writes the reason into err
// and changes nothing.
bool set_option(const char* name, const char* value, char* err, int64_t err_len);
// Current value of an option (sizes in bytes, booleans as 0/1); false for a bad name.
bool get_option(const char* name, int64_t* value);

enum class DumpFormat { TEXT, JSON };
// Writes the chunk manager dump into buf (always NUL-terminated, never allocates).
// Returns the length it needed, like snprintf.
int64_t print_chunk_dump(char* buf, int64_t len, DumpFormat format = DumpFormat::TEXT);

// Why the last allocation on this thread failed, as one line; returns the length needed.
int64_t last_failure_message(char* buf, int64_t len);

// Unmaps every cached chunk now (for hosts that know they are going idle). Returns bytes.
int64_t release_free_memory();

}  // namespace achunk
