// Chunk layer utility: how achunk declares thread-locals. initial-exec TLS is resolved at
// load time, so touching it never calls __tls_get_addr, which may call malloc.
// Depends on nothing.
#pragma once

#define ACHUNK_TLS __attribute__((tls_model("initial-exec"))) thread_local
