// Run under LD_PRELOAD=libachunk_malloc.so with libpreload_atfork_lib.so preloaded before
// or after it, or with "dlopen PATH" to load the library at run time: fork repeatedly
// while other threads allocate; the library's atfork handlers allocate in prepare, parent
// and child. Every fork must return and every child allocate and exit 0.
#include <dlfcn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[1], "dlopen") == 0 &&
      dlopen(argv[2], RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    std::printf("dlopen failed: %s\n", dlerror());
    return 1;
  }
  using Calls = int (*)();
  auto calls = reinterpret_cast<Calls>(dlsym(RTLD_DEFAULT, "atfork_lib_calls"));
  if (calls == nullptr) {
    std::printf("the atfork library is not loaded\n");
    return 1;
  }
  // A watchdog: a hang is a failure, not a stuck test.
  alarm(60);
  std::atomic<bool> stop{false};
  std::vector<std::thread> churn;
  for (int t = 0; t < 3; ++t) {
    churn.emplace_back([&, t] {
      std::vector<void*> live;
      while (!stop.load()) {
        live.push_back(std::malloc(16 + (live.size() * 37 + t) % 70000));
        if (live.size() > 100) {
          for (void* p : live) std::free(p);
          live.clear();
        }
      }
      for (void* p : live) std::free(p);
    });
  }
  int failures = 0;
  const int before = calls();
  constexpr int FORKS = 40;
  for (int i = 0; i < FORKS; ++i) {
    const pid_t pid = fork();
    if (pid == 0) {
      alarm(30);
      for (int k = 0; k < 1000; ++k) {
        char* p = static_cast<char*>(std::malloc(100 + k * 50));
        std::memset(p, 1, 100 + k * 50);
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
  // Prepare and parent handlers in this process, per fork.
  const int ran = calls() - before;
  std::printf("atfork ok, %d failures, %d handler runs\n", failures, ran);
  return failures == 0 && ran == 2 * FORKS ? 0 : 1;
}
