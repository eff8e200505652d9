#include "context/memory_context.h"

#include <atomic>
#include <mutex>
#include <new>

#include "achunk/base/alloc_failure.h"
#include "achunk/base/buf_writer.h"
#include "achunk/base/error_report.h"
#include "alloc/object/label.h"
#include "alloc/object/malloc_allocator.h"
#include "context/arena.h"
#include "context/context_env.h"
#include "context/ob_allocator.h"
#include "context/page_manager.h"
#include "context/parallel_allocator.h"

namespace achunk {

struct ContextNode {
  // `pm` is the thread's page manager for a use_pm context, else nullptr (shared pages).
  // `role`: HELD only for the root's locks (see memory_context_visit_fork_locks).
  ContextNode(const ContextParam& p, std::source_location s, BlockSource* pm, ObjectSet& set,
              ForkRole role)
      : param(p),
        site(s),
        label_id(achunk::label_id_cached(p.label_)),
        use_pm(pm != nullptr),
        tree_lock(role),
        shared(set),
        source(pm != nullptr ? *pm : static_cast<BlockSource&>(shared)),
        freeable(source, p.page_size_, (p.properties_ & ALLOC_THREAD_SAFE) != 0, p.parallel_, role),
        arena(source, p.page_size_, (p.properties_ & ALLOC_THREAD_SAFE) != 0, role) {}

  ContextParam param;
  std::source_location site;
  uint16_t label_id;
  bool use_pm;
  // The creating thread (see this_thread_marker), for the use_pm same-thread rule.
  const void* creator = this_thread_marker();
  ContextSlot* parent = nullptr;
  ContextSlot* first_child = nullptr;
  ContextSlot* prev = nullptr;
  ContextSlot* next = nullptr;
  SpinLock tree_lock;  // children list, when ADD_CHILD_THREAD_SAFE
  SharedBlockSource shared;
  BlockSource& source;
  ObParallelAllocator freeable;
  ObArenaAllocator arena;
};

// Slots are never freed: a stale handle can always read its slot's sequence number.
struct ContextSlot {
  std::atomic<uint64_t> seq{0};  // 0: free
  ContextSlot* next_free = nullptr;
  alignas(ContextNode) unsigned char storage[sizeof(ContextNode)];
  ContextNode* node() { return reinterpret_cast<ContextNode*>(storage); }
  MemoryContext handle() { return MemoryContext(this, seq.load(std::memory_order_relaxed)); }
  static ContextSlot* of(const MemoryContext& ctx) { return ctx.slot_; }
};

inline ContextNode* MemoryContext::node() const {
  if (slot_ == nullptr || seq_ == 0 || slot_->seq.load(std::memory_order_acquire) != seq_) {
    return nullptr;
  }
  return slot_->node();
}

namespace {

std::atomic<uint64_t> g_next_seq{1};
std::atomic<ContextEnvSource> g_env_source{nullptr};
ACHUNK_STATIC_SPIN_LOCK(g_slots_lock, ForkRole::HELD);
ContextSlot* g_free_slots = nullptr;
constexpr int SLOTS_PER_BATCH = 32;

void default_leak_handler(const LeakReport& r) {
  char line[400];
  BufWriter w(line, sizeof(line));
  w.str("achunk: memory context '").str(r.context_label).str("' created at ").str(r.file);
  w.ch(':').num(r.line).str(" (").str(r.function).str(") destroyed with ").num(r.count);
  w.str(" live objects of label '").str(r.label).str("', ").num(r.bytes).str(" bytes");
  write_stderr_line(line);
}
std::atomic<LeakHandler> g_leak_handler{&default_leak_handler};
std::atomic<ContextSlot*> g_root{nullptr};  // once root_slot() made it

}  // namespace

void memory_context_visit_fork_locks(ForkLockVisitor& v) {
  v.visit(g_slots_lock, "memory_context.slots");
  // The root is every thread's: a child must be able to create under it and allocate in
  // it. (Other contexts' locks are their owners', as a mutex in a user object is.)
  if (ContextSlot* root = g_root.load(std::memory_order_acquire)) {
    ContextNode* n = root->node();
    v.visit(n->tree_lock, "memory_context.root_tree");
    n->freeable.visit_fork_locks(v);
    n->arena.visit_fork_locks(v);
  }
}

namespace {

ContextSlot* take_slot(ObMallocAllocator& directory) {
  std::lock_guard<SpinLock> guard(g_slots_lock);
  if (g_free_slots == nullptr) {
    // A batch of slots from the server tenant, never given back (see ContextSlot).
    void* mem = directory.alloc(sizeof(ContextSlot) * SLOTS_PER_BATCH,
                                ObMemAttr(OB_SERVER_TENANT_ID, "MemCtxSlots"));
    if (mem == nullptr) return nullptr;
    auto* batch = static_cast<ContextSlot*>(mem);
    for (int i = 0; i < SLOTS_PER_BATCH; ++i) {
      ContextSlot* s = new (&batch[i]) ContextSlot();
      s->next_free = g_free_slots;
      g_free_slots = s;
    }
  }
  ContextSlot* slot = g_free_slots;
  g_free_slots = slot->next_free;
  return slot;
}

void put_slot(ContextSlot* slot) {
  std::lock_guard<SpinLock> guard(g_slots_lock);
  slot->next_free = g_free_slots;
  g_free_slots = slot;
}

absl::Status validate(const ContextParam& p) {
  if (p.label_ == nullptr || p.label_[0] == '\0') {
    return absl::InvalidArgumentError("ContextParam: a label is required");
  }
  if (p.ctx_id_ < 0 || p.ctx_id_ >= MAX_CTX_ID) {
    return absl::InvalidArgumentError("ContextParam: ctx_id out of range");
  }
  if (p.page_size_ < 1024 || p.page_size_ > (int64_t{64} << 20)) {
    return absl::InvalidArgumentError("ContextParam: page_size must be in [1 KiB, 64 MiB]");
  }
  if (p.parallel_ < 1 || p.parallel_ > 64) {
    return absl::InvalidArgumentError("ContextParam: parallel must be in [1, 64]");
  }
  if ((p.properties_ & ~ALL_CONTEXT_PROPERTIES) != 0) {
    return absl::InvalidArgumentError("ContextParam: unknown property bits");
  }
  return absl::OkStatus();
}

void link_child(ContextSlot* parent, ContextSlot* child) {
  ContextNode* p = parent->node();
  const bool locked = (p->param.properties_ & ADD_CHILD_THREAD_SAFE) != 0;
  if (locked) p->tree_lock.lock();
  ContextNode* c = child->node();
  c->parent = parent;
  c->next = p->first_child;
  if (p->first_child != nullptr) p->first_child->node()->prev = child;
  p->first_child = child;
  if (locked) p->tree_lock.unlock();
}

void unlink_child(ContextSlot* child) {
  ContextNode* c = child->node();
  if (c->parent == nullptr) return;
  ContextNode* p = c->parent->node();
  const bool locked = (p->param.properties_ & ADD_CHILD_THREAD_SAFE) != 0;
  if (locked) p->tree_lock.lock();
  if (c->prev != nullptr) {
    c->prev->node()->next = c->next;
  } else {
    p->first_child = c->next;
  }
  if (c->next != nullptr) c->next->node()->prev = c->prev;
  c->parent = c->prev = c->next = nullptr;
  if (locked) p->tree_lock.unlock();
}

// A use_pm context can only be given back on the thread whose page manager it uses.
bool destroyable_here(ContextSlot* slot) {
  ContextNode* n = slot->node();
  if (n->use_pm && n->creator != this_thread_marker()) return false;
  for (ContextSlot* c = n->first_child; c != nullptr; c = c->node()->next) {
    if (!destroyable_here(c)) return false;
  }
  return true;
}

void report_leaks(ContextNode* n) {
  const ObParallelAllocator& a = n->freeable;
  if (a.live_count() == 0) return;
  const LeakHandler handler = g_leak_handler.load();
  if (a.single_label() >= 0) {  // one label: the counters say it all, no scan
    handler(LeakReport{n->param.label_, n->site.file_name(), static_cast<int>(n->site.line()),
                       n->site.function_name(), label_name(static_cast<uint16_t>(a.single_label())),
                       a.live_count(), a.used()});
    return;
  }
  LabelUsage labels[32];
  LabelUsage total;
  const int count = n->freeable.scan_usage(labels, 32, &total);
  for (int i = 0; i < count; ++i) {
    handler(LeakReport{n->param.label_, n->site.file_name(), static_cast<int>(n->site.line()),
                       n->site.function_name(), label_name(labels[i].label), labels[i].count,
                       labels[i].used});
  }
}

void destroy_subtree(ContextSlot* slot) {
  ContextNode* n = slot->node();
  while (n->first_child != nullptr) {
    ContextSlot* child = n->first_child;
    unlink_child(child);
    destroy_subtree(child);
  }
  report_leaks(n);
  slot->seq.store(0, std::memory_order_release);  // every handle to it is stale from here
  n->~ContextNode();
  put_slot(slot);
}

absl::StatusOr<MemoryContext> create(ContextSlot* parent, const ContextParam& param,
                                     std::source_location site,
                                     ForkRole role = ForkRole::NOT_HELD) {
  if (absl::Status st = validate(param); !st.ok()) return st;
  const ContextEnvSource source = g_env_source.load(std::memory_order_acquire);
  const ContextEnv env = source != nullptr ? source() : ContextEnv{};
  ObMallocAllocator* directory = env.directory;
  const std::atomic<bool>* use_pm = env.use_pm;
  if (directory == nullptr || use_pm == nullptr) {
    return absl::FailedPreconditionError("memory context: the process wiring is not set up");
  }
  ObTenantCtxAllocator* ta = directory->get_tenant_ctx_allocator(param.tenant_id_, param.ctx_id_);
  if (ta == nullptr) {
    return absl::InvalidArgumentError("ContextParam: no room for another tenant");
  }
  ObPageManager* pm = nullptr;
  if ((param.properties_ & USE_TL_PAGE_OPTIONAL) != 0 && use_pm->load(std::memory_order_relaxed)) {
    pm = ObPageManager::for_this_thread(*ta);  // nullptr: another ctx's; use shared pages
  }
  ContextSlot* slot = take_slot(*directory);
  if (slot == nullptr) {
    char why[200];
    format_alloc_failure(last_alloc_failure(), why, sizeof(why));
    return absl::ResourceExhaustedError(why);
  }
  new (slot->storage) ContextNode(param, site, pm, ta->object_set(), role);
  slot->seq.store(g_next_seq.fetch_add(1, std::memory_order_relaxed), std::memory_order_release);
  if (parent != nullptr) link_child(parent, slot);
  return slot->handle();
}

ContextSlot* root_slot() {
  static ContextSlot* root = [] {
    ContextParam p;
    p.set_mem_attr(OB_SERVER_TENANT_ID, "ROOT_CONTEXT")
        .set_properties(ADD_CHILD_THREAD_SAFE | ALLOC_THREAD_SAFE);
    absl::StatusOr<MemoryContext> ctx =
        create(nullptr, p, std::source_location::current(), ForkRole::HELD);
    ContextSlot* slot = ctx.ok() ? ContextSlot::of(*ctx) : nullptr;
    g_root.store(slot, std::memory_order_release);
    return slot;
  }();
  return root;
}

}  // namespace

void install_context_env(ContextEnvSource source) {
  g_env_source.store(source, std::memory_order_release);
}

LeakHandler set_leak_handler(LeakHandler handler) {
  return g_leak_handler.exchange(handler != nullptr ? handler : &default_leak_handler);
}

MemoryContext MemoryContext::root() {
  ContextSlot* slot = root_slot();
  return slot != nullptr ? slot->handle() : MemoryContext();
}

absl::Status MemoryContext::check() const {
  if (slot_ == nullptr) return absl::FailedPreconditionError("memory context: empty handle");
  if (node() == nullptr) {
    return absl::FailedPreconditionError("memory context: handle used after destroy");
  }
  return absl::OkStatus();
}

absl::StatusOr<MemoryContext> MemoryContext::create_child(const ContextParam& param,
                                                          std::source_location site) const {
  if (absl::Status st = check(); !st.ok()) return st;
  return create(slot_, param, site);
}

absl::StatusOr<MemoryContext> MemoryContext::create_detached(const ContextParam& param,
                                                             std::source_location site) {
  return create(nullptr, param, site);
}

absl::Status MemoryContext::destroy() {
  if (absl::Status st = check(); !st.ok()) return st;
  if (slot_ == root_slot())
    return absl::InvalidArgumentError("the root context is never destroyed");
  if (!destroyable_here(slot_)) {
    return absl::FailedPreconditionError(
        "memory context: a use_pm context in this subtree belongs to another thread");
  }
  unlink_child(slot_);
  destroy_subtree(slot_);
  return absl::OkStatus();
}

namespace {

// The node if the calling thread may allocate from it; else nullptr with a reason.
ContextNode* usable_node(ContextNode* n) {
  if (n == nullptr) {
    set_alloc_failure(AllocFailure{AllocFailKind::INVALID_ARGUMENT, 0, 0, 0, 0});
    return nullptr;
  }
  if (n->use_pm && n->creator != this_thread_marker()) {
    set_alloc_failure(AllocFailure{AllocFailKind::INVALID_ARGUMENT, 0, 0, 0, 0});
    return nullptr;
  }
  return n;
}

}  // namespace

void* MemoryContext::allocf(int64_t size, const char* label) const {
  ContextNode* n = usable_node(node());
  if (n == nullptr) return nullptr;
  return n->freeable.alloc(size, label == nullptr ? n->label_id : label_id_cached(label));
}

absl::Status MemoryContext::free(void* ptr) const {
  ContextNode* n = node();
  if (n == nullptr) return check();
  if (n->use_pm && n->creator != this_thread_marker()) {
    return absl::FailedPreconditionError("memory context: use_pm context freed on another thread");
  }
  if (!n->freeable.free(ptr)) {
    return absl::InvalidArgumentError("memory context: not a live object of this context");
  }
  return absl::OkStatus();
}

void* MemoryContext::allocp(int64_t size) const {
  ContextNode* n = usable_node(node());
  return n != nullptr ? n->arena.alloc(size) : nullptr;
}

void* MemoryContext::alloc(int64_t size) const {
  ContextNode* n = node();
  if (n != nullptr && (n->param.properties_ & RETURN_MALLOC_DEFAULT) != 0) return allocf(size);
  return allocp(size);
}

absl::Status MemoryContext::reuse_arena() const {
  ContextNode* n = node();
  if (n == nullptr) return check();
  n->arena.reuse();
  return absl::OkStatus();
}

int64_t MemoryContext::hold() const {
  ContextNode* n = node();
  return n != nullptr ? n->freeable.hold() + n->arena.hold() : 0;
}

int64_t MemoryContext::used() const {
  ContextNode* n = node();
  return n != nullptr ? n->freeable.used() + n->arena.used() : 0;
}

int64_t MemoryContext::tree_hold() const {
  ContextNode* n = node();
  if (n == nullptr) return 0;
  int64_t sum = n->freeable.hold() + n->arena.hold();
  const bool locked = (n->param.properties_ & ADD_CHILD_THREAD_SAFE) != 0;
  if (locked) n->tree_lock.lock();
  for (ContextSlot* c = n->first_child; c != nullptr; c = c->node()->next) {
    sum += c->handle().tree_hold();
  }
  if (locked) n->tree_lock.unlock();
  return sum;
}

bool MemoryContext::uses_pm() const {
  ContextNode* n = node();
  return n != nullptr && n->use_pm;
}

const char* MemoryContext::label() const {
  ContextNode* n = node();
  return n != nullptr ? n->param.label_ : "(stale)";
}

}  // namespace achunk
