// Test support: IdleThread, a thread that runs what it is given and waits between, so
// its heaps stay alive without a call. Depends on the standard library only.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>

namespace achunk::testing {

// A thread that runs what it is given and waits, idle, between: its heaps stay alive
// without a call, like a server thread waiting for work.
class IdleThread {
 public:
  IdleThread() : thread_([this] { loop(); }) {}
  ~IdleThread() {
    run(nullptr);
    thread_.join();
  }
  // Runs f on the thread and waits for it; nullptr ends the thread.
  void run(std::function<void()> f) {
    std::unique_lock<std::mutex> lock(mu_);
    job_ = std::move(f);
    quit_ = !job_;
    pending_ = true;
    cv_.notify_all();
    cv_.wait(lock, [&] { return !pending_ || quit_; });
  }

 private:
  void loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (true) {
      cv_.wait(lock, [&] { return pending_; });
      if (quit_) return;
      job_();
      pending_ = false;
      cv_.notify_all();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::function<void()> job_;
  bool pending_ = false;
  bool quit_ = false;
  std::thread thread_;
};

}  // namespace achunk::testing
