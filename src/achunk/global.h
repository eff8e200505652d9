// The one place where achunk's process-wide objects are wired: the real OS, the real
// clock, the global AChunkMgr and the current option values, configured from
// ACHUNK_CONF on first use and never destroyed (so frees after exit() still work).
// Depends on the chunk layer.
#pragma once

#include "achunk/achunk_mgr.h"
#include "achunk/options.h"

namespace achunk {

AChunkMgr& global_chunk_mgr();

}  // namespace achunk
