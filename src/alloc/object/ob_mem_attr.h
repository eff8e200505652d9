// Object layer: ObMemAttr, who an allocation is charged to: a tenant, a context id
// (ctx) inside the tenant, and a label. Depends on nothing.
#pragma once

#include <cstdint>

namespace achunk {

inline constexpr uint64_t OB_SERVER_TENANT_ID = 500;
inline constexpr uint64_t OB_SYS_TENANT_ID = 1;

// A subset of OceanBase's ctx ids; the numbering is achunk's own.
enum ObCtxId : int {
  DEFAULT_CTX_ID = 0,
  MEMSTORE_CTX_ID,
  EXECUTE_CTX_ID,
  TRANS_CTX_MGR_ID,
  PLAN_CACHE_CTX_ID,
  WORK_AREA,
  GLIBC,
  CO_STACK,
  LIBEASY,
  LOGGER_CTX_ID,
  KVSTORE_CACHE_ID,
  MAX_CTX_ID,
};

const char* ctx_name(int ctx_id);

struct ObMemAttr {
  constexpr ObMemAttr() = default;
  constexpr ObMemAttr(uint64_t tenant_id, const char* label, int ctx_id = DEFAULT_CTX_ID)
      : tenant_id_(tenant_id), label_(label), ctx_id_(ctx_id) {}

  uint64_t tenant_id_ = OB_SERVER_TENANT_ID;
  const char* label_ = nullptr;  // kept by pointer; the text is interned on first use
  int ctx_id_ = DEFAULT_CTX_ID;
};

}  // namespace achunk
