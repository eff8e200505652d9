// Context layer: MemoryContext, a handle to a node in the tree of memory contexts. Each
// context has a freeable allocator (ObAllocator) and an arena, taking pages from its
// (tenant, ctx) allocator or, with use_pm, from the thread's page manager. Destroying a
// context destroys its subtree, reports every label still holding objects (with the
// creation site) and frees everything. A handle carries a sequence number, so using it
// after destroy is refused with an error instead of touching freed memory.
// Depends on the object and context layers below it and absl::Status.
#pragma once

#include <cstdint>
#include <source_location>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "achunk/base/fork_locks.h"
#include "context/context_param.h"

namespace achunk {

struct ContextSlot;
struct ContextNode;

// One leaked label of a destroyed context.
struct LeakReport {
  const char* context_label;
  const char* file;  // where the context was created
  int line;
  const char* function;
  const char* label;  // the leaked objects' label
  int64_t count;
  int64_t bytes;  // requested bytes
};
using LeakHandler = void (*)(const LeakReport& report);
// Installs `handler` (nullptr restores the default, one line on stderr per label).
LeakHandler set_leak_handler(LeakHandler handler);

class MemoryContext {
 public:
  MemoryContext() = default;  // refers to nothing; check() fails

  // The process root (server tenant, DEFAULT ctx, thread-safe); never destroyed.
  static MemoryContext root();
  // The innermost context made current on this thread (WITH_CONTEXT), else the root.
  static MemoryContext current();

  absl::StatusOr<MemoryContext> create_child(
      const ContextParam& param, std::source_location site = std::source_location::current()) const;
  // A context with no parent, as CREATE_WITH_TEMP_CONTEXT makes.
  static absl::StatusOr<MemoryContext> create_detached(
      const ContextParam& param, std::source_location site = std::source_location::current());
  // Destroys this context and its subtree. Refused for the root, for a stale handle and
  // for a subtree holding a use_pm context of another thread.
  absl::Status destroy();
  // OK if the handle refers to a live context.
  absl::Status check() const;

  // Freeable allocation; nullptr with last_alloc_failure() set on failure or for a
  // stale handle (INVALID_ARGUMENT). `label` defaults to the context's label.
  void* allocf(int64_t size, const char* label = nullptr) const;
  absl::Status free(void* ptr) const;
  // Arena allocation, freed by reuse_arena() or destroy.
  void* allocp(int64_t size) const;
  // allocf with RETURN_MALLOC_DEFAULT, else allocp.
  void* alloc(int64_t size) const;
  absl::Status reuse_arena() const;

  int64_t hold() const;       // this context: freeable pages + arena pages
  int64_t used() const;       // this context: live freeable bytes + arena bytes
  int64_t tree_hold() const;  // this context and everything below it
  bool uses_pm() const;
  const char* label() const;

  bool operator==(const MemoryContext& o) const { return slot_ == o.slot_ && seq_ == o.seq_; }

 private:
  MemoryContext(ContextSlot* slot, uint64_t seq) : slot_(slot), seq_(seq) {}
  friend struct ContextSlot;
  // nullptr when stale. Inline (defined in memory_context.cc, its only user): every
  // allocation goes through it.
  [[gnu::always_inline]] inline ContextNode* node() const;

  ContextSlot* slot_ = nullptr;
  uint64_t seq_ = 0;
};

}  // namespace achunk
