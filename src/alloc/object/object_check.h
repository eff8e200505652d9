// Object layer: the checks every free makes on an object header, shared by ob_free and
// the memory contexts' allocators, and the report that names the object's size and
// label. Never allocates. Depends on aobject.h and the base layer's error reporting.
#pragma once

#include <cstdint>

#include "achunk/base/error_report.h"
#include "alloc/object/aobject.h"

namespace achunk {

// Reports `what` about the object at ptr with its size and label from `header`.
void report_object(ErrorKind kind, void* ptr, uint64_t header, const char* what);

// The header of the object at ptr if its state is IN_USE (or, when `also_big_aligned`,
// BIG or ALIGNED), else 0 after reporting a double free or a bad magic.
uint64_t live_header(void* ptr, bool also_big_aligned);

// True if the tail canary after `size` bytes is intact, else false after a report.
bool check_tail(void* ptr, uint64_t header, int64_t size, const char* what);

// Whether a free by another call family than the allocation's is reported (the option
// dealloc_mismatch); when off, it frees as asked.
void set_report_dealloc_mismatch(bool on);
bool report_dealloc_mismatch();

// True if `origin` allocated the object at ptr whose header word (a pad's for an aligned
// pointer) is `header`, or if mismatches are not reported. Else false after a report that
// names both calls; `freed_by` names the caller's ("free", "realloc", ...).
bool origin_matches(void* ptr, uint64_t header, AllocOrigin origin, const char* freed_by);
// The call that frees what `origin` allocates: "free", "operator delete", ...
const char* dealloc_name(AllocOrigin origin);

}  // namespace achunk
