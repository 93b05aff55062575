// Seed 000's lifetime trap, as whole programs: containers using
// pool_allocator that are destroyed at thread exit or during static
// destruction, after the thread that allocated their nodes (or the thread's
// pool, in the seed's design) is gone.
//
// Run as `pool_lifetime_exit <mode>`. The last destructor of the program
// (final_check, constructed first) uses the pools once more and prints
// "lifetime <mode>: exit ok"; a crash, a hang or a corrupted pool before
// that point makes the CTest case fail.
#include <strata/pool_allocator.hpp>

#include <cstdio>
#include <cstring>
#include <list>
#include <thread>
#include <unordered_set>

namespace {

using IntSet = std::unordered_set<int, std::hash<int>, std::equal_to<int>, strata::pool_allocator<int>>;
using IntList = std::list<int, strata::pool_allocator<int>>;

const char* mode = "none";

bool check_list(const IntList& l, int n) {
  int expected = 0;
  for (int x : l)
    if (x != expected++) return false;
  return expected == n;
}

// Constructed first, destroyed last: every other static is gone by then.
struct final_check {
  ~final_check() {
    IntList l;
    for (int i = 0; i < 10000; ++i) l.push_back(i);
    IntSet s;
    for (int i = 0; i < 10000; ++i) s.insert(i);
    bool ok = check_list(l, 10000) && s.size() == 10000;
    std::printf("lifetime %s: %s\n", mode, ok ? "exit ok" : "FAILED");
    std::fflush(stdout);
  }
} final_check_instance;

// Constructed before any pool is used (static initialisation of this file),
// hence destroyed after the main thread's thread_locals.
IntSet global_set;
IntList global_list;

void fill(IntList& l, int n) {
  for (int i = 0; i < n; ++i) l.push_back(i);
}

// A static whose first use comes after the pools are in use, so it is
// destroyed before global_set (reverse order of construction).
IntList& late_static_list() {
  static IntList l;
  return l;
}

// Destroyed during static destruction; its destructor allocates and frees.
struct allocates_in_destructor {
  ~allocates_in_destructor() {
    IntList tmp;
    fill(tmp, 5000);
    if (!check_list(tmp, 5000)) std::printf("allocates_in_destructor: corrupted\n");
    global_list.splice(global_list.end(), tmp);  // global_list frees these even later
  }
};

thread_local IntList main_thread_local_list;

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  mode = argv[1];
  if (std::strcmp(mode, "global_container") == 0) {
    for (int i = 0; i < 50000; ++i) global_set.insert(i * 3);
    fill(global_list, 20000);
  } else if (std::strcmp(mode, "worker_filled_global") == 0) {
    // The allocating thread exits long before the container is destroyed.
    std::thread([] {
      for (int i = 0; i < 50000; ++i) global_set.insert(i);
      fill(global_list, 20000);
    }).join();
    if (!check_list(global_list, 20000)) return 1;
  } else if (std::strcmp(mode, "thread_local_containers") == 0) {
    // A thread_local container made before the pool's first use on this
    // thread: it is destroyed after the thread's pool hook (the seed's order).
    (void)&main_thread_local_list;
    fill(main_thread_local_list, 20000);
    IntList handed_over;
    std::thread([&] {
      thread_local IntList worker_list;
      fill(worker_list, 20000);
      IntList tmp;
      fill(tmp, 20000);
      handed_over.splice(handed_over.end(), tmp);  // outlives this thread
    }).join();
    if (!check_list(handed_over, 20000)) return 1;
    global_list.splice(global_list.end(), handed_over);  // freed at static destruction
  } else if (std::strcmp(mode, "static_destruction_order") == 0) {
    fill(global_list, 1000);
    fill(late_static_list(), 20000);
    static allocates_in_destructor late;
    for (int i = 0; i < 20000; ++i) global_set.insert(i);
  } else {
    return 2;
  }
  return 0;
}
