#include "context/context_guard.h"

#include <new>

#include "achunk/base/tls.h"

namespace achunk {

namespace {

constexpr int MAX_DEPTH = 64;
ACHUNK_TLS MemoryContext tl_stack[MAX_DEPTH];
ACHUNK_TLS int tl_depth;

}  // namespace

MemoryContext MemoryContext::current() {
  for (int i = tl_depth - 1; i >= 0; --i) {
    if (tl_stack[i].check().ok()) return tl_stack[i];
  }
  return root();
}

ContextGuard::ContextGuard(MemoryContext ctx) {
  if (tl_depth >= MAX_DEPTH || !ctx.check().ok()) return;
  tl_stack[tl_depth++] = ctx;
  pushed_ = true;
}

ContextGuard::~ContextGuard() {
  if (pushed_) tl_stack[--tl_depth] = MemoryContext();
}

TempContextGuard::TempContextGuard(const ContextParam& param, std::source_location site) {
  absl::StatusOr<MemoryContext> ctx = MemoryContext::create_detached(param, site);
  if (!ctx.ok()) {
    status_ = ctx.status();
    return;
  }
  ctx_ = *ctx;
  guard_ = new (guard_storage_) ContextGuard(ctx_);
  if (!guard_->ok()) status_ = absl::ResourceExhaustedError("context stack is 64 deep");
}

TempContextGuard::~TempContextGuard() {
  if (guard_ != nullptr) guard_->~ContextGuard();
  if (ctx_.check().ok()) ctx_.destroy().IgnoreError();
}

}  // namespace achunk
