// Real threads that take turns: the fuzzing thread hands a run of operations
// to worker k and waits for it to finish. Each worker has its own strata
// thread cache, so blocks move between caches (cross-thread frees) while the
// interleaving stays fully determined by the input. A worker may also exit
// and be replaced, at a point the input chooses.
#pragma once

#include <condition_variable>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace strata_fuzz {

class TurnTakingThreads {
 public:
  explicit TurnTakingThreads(int workers) : workers_(static_cast<std::size_t>(workers)) {
    for (std::size_t i = 0; i < workers_.size(); ++i) workers_[i].thread = std::thread([this, i] { serve(i); });
  }
  ~TurnTakingThreads() {
    for (auto& w : workers_) {
      std::lock_guard<std::mutex> guard(w.lock);
      w.quit = true;
      w.wake.notify_one();
    }
    for (auto& w : workers_) w.thread.join();
  }

  // Worker `index` exits (strata's thread-exit path runs: its cache goes
  // back) and a new thread takes its place, young and without a cache.
  void restart(std::size_t index) {
    Worker& w = workers_[index];
    {
      std::lock_guard<std::mutex> guard(w.lock);
      w.quit = true;
      w.wake.notify_one();
    }
    w.thread.join();
    w.quit = false;  // the old thread is gone: nobody else reads it now
    w.thread = std::thread([this, index] { serve(index); });
  }

  // Runs `work` on worker `index` and returns when it is done.
  void run_on(std::size_t index, const std::function<void()>& work) {
    Worker& w = workers_[index];
    std::unique_lock<std::mutex> guard(w.lock);
    w.work = &work;
    w.wake.notify_one();
    w.done.wait(guard, [&] { return w.work == nullptr; });
  }

 private:
  struct Worker {
    std::thread thread;
    std::mutex lock;
    std::condition_variable wake, done;
    const std::function<void()>* work = nullptr;
    bool quit = false;
  };

  void serve(std::size_t index) {
    Worker& w = workers_[index];
    std::unique_lock<std::mutex> guard(w.lock);
    for (;;) {
      w.wake.wait(guard, [&] { return w.work != nullptr || w.quit; });
      if (w.work == nullptr) return;
      (*w.work)();
      w.work = nullptr;
      w.done.notify_one();
    }
  }

  std::vector<Worker> workers_;
};

}  // namespace strata_fuzz
