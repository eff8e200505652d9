// The fork matrix's program: forks per second of one shape, under whatever malloc is
// preloaded. Plain malloc/free, fork, waitpid and exec only.
//   request [small|large]  the parent holds 4,096 objects of 16-512 B (small) or 1 GiB in
//                          1 MiB buffers, every page touched (large); each child
//                          allocates 64 objects of 16-512 B, frees them and exits
//   exit [small|large]     the same parent; each child exits at once
//   exec                   a parent with 4 threads allocating and freeing meanwhile;
//                          each child execs /bin/true
// Prints "<shape> <parent> <forks/s> forks/s <n> forks <ms> ms".
// Usage: achunk_fork_bench SHAPE [small|large] [seconds, default 3]
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

void* volatile g_sink;
std::atomic<bool> g_stop{false};

size_t small_size(unsigned i) {
  return 16 + (i * 2654435761u) % 497;
}

std::vector<void*> build_parent(bool large) {
  std::vector<void*> held;
  if (large) {
    constexpr size_t MB = size_t{1} << 20;
    for (int i = 0; i < 1024; ++i) {
      char* p = static_cast<char*>(std::malloc(MB));
      for (size_t off = 0; off < MB; off += 4096) p[off] = static_cast<char>(i);
      held.push_back(p);
    }
  }
  for (unsigned i = 0; i < 4096; ++i) {
    char* p = static_cast<char*>(std::malloc(small_size(i)));
    p[0] = static_cast<char>(i);
    held.push_back(p);
  }
  return held;
}

[[noreturn]] void child_request() {
  void* objects[64];
  for (unsigned i = 0; i < 64; ++i) {
    objects[i] = std::malloc(small_size(i * 7));
    std::memset(objects[i], 1, 16);
  }
  g_sink = objects[63];
  for (void* p : objects) std::free(p);
  _exit(0);
}

void* churn(void*) {
  unsigned i = 0;
  while (!g_stop.load(std::memory_order_relaxed)) {
    void* p = std::malloc(small_size(i++));
    g_sink = p;
    std::free(p);
  }
  return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
  const char* shape = argc > 1 ? argv[1] : "";
  const bool request = std::strcmp(shape, "request") == 0;
  const bool exit_only = std::strcmp(shape, "exit") == 0;
  const bool exec = std::strcmp(shape, "exec") == 0;
  const char* parent = argc > 2 ? argv[2] : "small";
  const bool large = std::strcmp(parent, "large") == 0;
  const double seconds = argc > 3 ? std::atof(argv[3]) : 3;
  if ((!request && !exit_only && !exec) || (!large && std::strcmp(parent, "small") != 0) ||
      seconds <= 0) {
    std::fprintf(stderr, "usage: achunk_fork_bench request|exit|exec [small|large] [seconds]\n");
    return 2;
  }
  std::vector<void*> held = build_parent(large);
  pthread_t threads[4];
  const int nthreads = exec ? 4 : 0;
  for (int t = 0; t < nthreads; ++t) pthread_create(&threads[t], nullptr, &churn, nullptr);

  using Clock = std::chrono::steady_clock;
  const auto start = Clock::now();
  const auto end = start + std::chrono::duration<double>(seconds);
  long forks = 0;
  while (Clock::now() < end) {
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) {
      if (request) child_request();
      if (exec) {
        execl("/bin/true", "true", static_cast<char*>(nullptr));
        _exit(127);
      }
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "fork_bench: a child failed (status %d)\n", status);
      return 1;
    }
    ++forks;
  }
  const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  g_stop.store(true);
  for (int t = 0; t < nthreads; ++t) pthread_join(threads[t], nullptr);
  for (void* p : held) std::free(p);
  std::printf("%s %s %.0f forks/s %ld forks %.0f ms\n", shape, parent, forks * 1000.0 / ms, forks,
              ms);
  return 0;
}
