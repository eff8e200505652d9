-- sysbench script driving achunk's C API through LuaJIT FFI: a chunk-level burst and
-- quiet workload, no database. Each event allocates and frees one 2-8 MiB block and
-- touches its pages; after --burst-seconds the threads slow to one event per 100 ms.
-- libachunk_malloc.so uses initial-exec TLS, so it is preloaded, not dlopen'ed:
--   LD_PRELOAD=build/libachunk_malloc.so sysbench bench/sysbench/achunk_chunks.lua \
--     --threads=2 --time=60 [--burst-seconds=10] run
sysbench.cmdline.options = {
  ["burst-seconds"] = {"seconds of burst before the quiet phase", 10},
}

local ffi = require("ffi")
ffi.cdef[[
void* achunk_malloc(size_t size);
void achunk_free(void* ptr);
long achunk_print_chunk_dump(char* buf, size_t len, int json);
int usleep(unsigned int usec);
]]

local lib
local start

function thread_init()
  lib = ffi.C  -- the preloaded library's symbols are global
  start = os.time()
end

function event()
  local size = (2 + 2 * math.random(0, 3)) * 1024 * 1024 - 65536
  local p = ffi.cast("char*", lib.achunk_malloc(size))
  for off = 0, size - 1, 4096 do p[off] = 1 end
  lib.achunk_free(p)
  if os.time() - start >= sysbench.opt.burst_seconds then ffi.C.usleep(100000) end
end

function thread_done()
  if sysbench.tid == 0 then
    local buf = ffi.new("char[?]", 8192)
    lib.achunk_print_chunk_dump(buf, 8192, 0)
    print(ffi.string(buf))
  end
end
