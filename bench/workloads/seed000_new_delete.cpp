// Seed 000: new + delete of an empty class, cycles per pair ("normal Obj").
//
// The lecture's test: start and join a thread first (glibc is slower once a
// process has had a second thread), then 1000 loops of 5000 `new Obj` followed
// by 5000 `delete`. The pooled variant (class-specific operator new on a
// pool) is measured by bench/pools; here Obj uses the global operator new, so
// the preloaded allocator is what is measured.
#include "../common/bench_util.hpp"

namespace {
class Obj {};  // empty: sizeof(Obj) == 1, the smallest request there is
}  // namespace

int main(int argc, char** argv) {
  bench::Args args(argc, argv, {"loops", "batch"});
  const long loops = args.integer("loops", 1000);
  const long batch = args.integer("batch", 5000);

  bench::become_multithreaded();
  std::vector<Obj*> objects(static_cast<std::size_t>(batch));
  Obj** slots = objects.data();

  std::uint64_t t0 = bench::now_ns(), c0 = bench::cycles();
  for (long loop = 0; loop < loops; ++loop) {
    for (long i = 0; i < batch; ++i) {
      slots[i] = new Obj;
      bench::escape(slots[i]);  // new/delete pairs may otherwise be elided
    }
    for (long i = 0; i < batch; ++i) delete slots[i];
  }
  std::uint64_t c = bench::cycles() - c0, t = bench::now_ns() - t0;
  double pairs = double(loops) * double(batch);
  bench::Params params = {{"variant", "\"normal\""}, {"loops", std::to_string(loops)},
                          {"batch", std::to_string(batch)}};
  bench::emit("seed000_new_delete", "cycles_per_pair", double(c) / pairs, "cycles", params);
  bench::emit("seed000_new_delete", "ns_per_pair", double(t) / pairs, "ns", params);
  bench::emit_peak_live("seed000_new_delete", double(batch) * (sizeof(Obj) + sizeof(Obj*)), params);
}
