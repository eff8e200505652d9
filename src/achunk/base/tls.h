// Base layer: how achunk declares thread-locals. initial-exec TLS is resolved at
// load time, so touching it never calls __tls_get_addr, which may call malloc. __thread
// rather than thread_local: it promises static initialisation, so a thread-local declared
// extern in a header is read directly, without a call to an init wrapper first.
// Depends on nothing.
#pragma once

#define ACHUNK_TLS __attribute__((tls_model("initial-exec"))) __thread
