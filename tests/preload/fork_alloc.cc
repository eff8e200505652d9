// Run under LD_PRELOAD=libachunk_malloc.so: fork repeatedly while other threads allocate
// and free; every child must be able to allocate, use and free memory and exit 0.
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

int main() {
  std::atomic<bool> stop{false};
  std::vector<std::thread> churn;
  for (int t = 0; t < 3; ++t) {
    churn.emplace_back([&] {
      std::vector<void*> live;
      while (!stop.load()) {
        live.push_back(std::malloc(16 + live.size() * 37 % 5000));
        if (live.size() > 100) {
          for (void* p : live) std::free(p);
          live.clear();
        }
      }
      for (void* p : live) std::free(p);
    });
  }
  int failures = 0;
  for (int i = 0; i < 50; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      for (int k = 0; k < 1000; ++k) {
        char* p = static_cast<char*>(std::malloc(100 + k));
        std::memset(p, 1, 100 + k);
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
  std::printf("fork ok, %d failures\n", failures);
  return failures == 0 ? 0 : 1;
}
