// For the preload fork programs: forks `forks` times while three threads allocate and
// free objects of up to `max_size` bytes; each child allocates, writes and frees 1000
// objects (100 + k * `child_step` bytes) and exits 0. Returns the forks that failed (no
// child, or a child that did not exit 0). Uses only malloc and free, so it runs under
// any preloaded allocator.
#pragma once

#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

inline int fork_while_threads_allocate(int forks, size_t max_size, size_t child_step) {
  std::atomic<bool> stop{false};
  std::vector<std::thread> churn;
  for (int t = 0; t < 3; ++t) {
    churn.emplace_back([&, t] {
      std::vector<void*> live;
      while (!stop.load()) {
        live.push_back(std::malloc(16 + (live.size() * 37 + static_cast<size_t>(t)) % max_size));
        if (live.size() > 100) {
          for (void* p : live) std::free(p);
          live.clear();
        }
      }
      for (void* p : live) std::free(p);
    });
  }
  int failures = 0;
  for (int i = 0; i < forks; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(30);  // a child that hangs fails instead of stalling the test
      for (size_t k = 0; k < 1000; ++k) {
        char* p = static_cast<char*>(std::malloc(100 + k * child_step));
        std::memset(p, 1, 100 + k * child_step);
        std::free(p);
      }
      _exit(0);
    }
    int status = 0;
    if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status) ||
        WEXITSTATUS(status) != 0) {
      ++failures;
    }
  }
  stop.store(true);
  for (auto& t : churn) t.join();
  return failures;
}
