// Memory over time after a cache is evicted (issue 11).
//
// The program fills a cache of --blocks small objects (16-256 B, uniform;
// each written with memset), frees --evict-percent of them at random (the
// cache is evicted), then idles lightly for --idle-ms: every millisecond it
// replaces 16 blocks of a small rotating set (a trickle of malloc/free, so
// that allocators that return memory only from inside malloc or free get
// their chance), and sleeps. A sampler thread reads the resident set from
// /proc/self/statm every --sample-ms from the start; it never allocates.
// Printed: every sample as a JSON line (t_ms relative to the end of the
// eviction, negative before it), the resident set 1, 2 and 3 s after the
// eviction, its peak, and the bytes still live.
#include <random>

#include "../common/bench_util.hpp"

namespace {

struct Sample {
  std::int64_t t_ns;  // since the start of the program's measurement
  long kib;
};

// Samples the resident set into a preallocated array until told to stop.
class Sampler {
 public:
  Sampler(long period_ms, std::size_t capacity) : period_ms_(period_ms) { samples_.resize(capacity); }
  void start() {
    start_ns_ = bench::now_ns();
    thread_ = std::thread([this] {
      while (!stop_.load(std::memory_order_acquire)) {
        take();
        std::this_thread::sleep_for(std::chrono::milliseconds(period_ms_));
      }
      take();
    });
  }
  void stop() {
    stop_.store(true, std::memory_order_release);
    thread_.join();
  }
  std::int64_t since_start(std::uint64_t ns) const { return static_cast<std::int64_t>(ns - start_ns_); }
  const Sample* begin() const { return samples_.data(); }
  const Sample* end() const { return samples_.data() + count_; }

 private:
  void take() {
    if (count_ < samples_.size()) samples_[count_++] = {since_start(bench::now_ns()), bench::resident_kib()};
  }
  long period_ms_;
  std::uint64_t start_ns_ = 0;
  std::vector<Sample> samples_;
  std::size_t count_ = 0;  // written by the sampler thread only; read after join
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace

int main(int argc, char** argv) {
  bench::Args args(argc, argv, {"blocks", "min-size", "max-size", "evict-percent", "idle-ms", "sample-ms", "seed"});
  const long count = args.integer("blocks", 2000000);
  const long min_size = args.integer("min-size", 16);
  const long max_size = args.integer("max-size", 256);
  const long evict_percent = args.integer("evict-percent", 99);
  const long idle_ms = args.integer("idle-ms", 3000);
  const long sample_ms = std::max(1L, args.integer("sample-ms", 50));
  std::mt19937_64 engine(static_cast<std::uint64_t>(args.integer("seed", 5)));

  // Everything the program itself needs is allocated before sampling starts.
  std::vector<char*> blocks(static_cast<std::size_t>(count));
  std::vector<std::uint32_t> sizes(static_cast<std::size_t>(count));
  std::vector<std::uint32_t> order(static_cast<std::size_t>(count));
  std::uniform_int_distribution<std::uint32_t> size_dist(static_cast<std::uint32_t>(min_size),
                                                         static_cast<std::uint32_t>(max_size));
  for (auto& s : sizes) s = size_dist(engine);
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = static_cast<std::uint32_t>(i);
  std::shuffle(order.begin(), order.end(), engine);
  constexpr std::size_t kTrickle = 256;
  char* trickle[kTrickle] = {};
  std::uint32_t trickle_size[kTrickle] = {};
  const double arrays = double(count) * (sizeof(char*) + 2 * sizeof(std::uint32_t));

  bench::become_multithreaded();
  Sampler sampler(sample_ms, static_cast<std::size_t>(10000 + 2 * (idle_ms + 60000) / sample_ms));
  sampler.start();

  // Build the cache.
  std::uint64_t t_build = bench::now_ns();
  double live = 0;
  for (std::size_t i = 0; i < blocks.size(); ++i) {
    blocks[i] = static_cast<char*>(std::malloc(sizes[i]));
    std::memset(blocks[i], static_cast<int>(i), sizes[i]);
    live += sizes[i];
  }
  const double peak_live = live;
  // Evict most of it, at random.
  std::uint64_t t_evict = bench::now_ns();
  const std::size_t evicted = order.size() * static_cast<std::size_t>(evict_percent) / 100;
  for (std::size_t k = 0; k < evicted; ++k) {
    std::size_t i = order[k];
    std::free(blocks[i]);
    blocks[i] = nullptr;
    live -= sizes[i];
  }
  std::uint64_t t_evicted = bench::now_ns();
  // Idle lightly: a trickle of small allocations.
  std::size_t next = 0;
  while (bench::now_ns() - t_evicted < static_cast<std::uint64_t>(idle_ms) * 1000000) {
    for (int k = 0; k < 16; ++k, ++next) {
      std::size_t at = next % kTrickle;
      std::free(trickle[at]);
      trickle_size[at] = size_dist(engine);
      trickle[at] = static_cast<char*>(std::malloc(trickle_size[at]));
      trickle[at][0] = 1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  sampler.stop();
  double trickle_bytes = 0;
  for (std::size_t k = 0; k < kTrickle; ++k) trickle_bytes += trickle_size[k];

  const std::int64_t evicted_at = sampler.since_start(t_evicted);
  long peak_kib = 0;
  auto rss_at = [&](std::int64_t after_ms) {  // the last sample at or before the time
    long kib = -1;
    for (const Sample& s : sampler)
      if (s.t_ns - evicted_at <= after_ms * 1000000) kib = s.kib;
    return kib;
  };
  for (const Sample& s : sampler) {
    peak_kib = std::max(peak_kib, s.kib);
    const std::int64_t t_ms = (s.t_ns - evicted_at) / 1000000;
    const char* phase = s.t_ns < sampler.since_start(t_evict) ? "build" : s.t_ns < evicted_at ? "evict" : "idle";
    bench::emit("memory_over_time", "rss_sample_mib", double(s.kib) / 1024.0, "MiB",
                {{"t_ms", std::to_string(t_ms)}, {"phase", bench::quoted(phase)}});
  }
  bench::Params params = {{"blocks", std::to_string(count)}, {"evict_percent", std::to_string(evict_percent)}};
  for (long second = 1; second * 1000 <= idle_ms; ++second) {
    auto p = params;
    p.push_back({"after_s", std::to_string(second)});
    bench::emit("memory_over_time", "rss_after_mib", double(rss_at(second * 1000)) / 1024.0, "MiB", p);
  }
  bench::emit("memory_over_time", "rss_at_eviction_mib", double(rss_at(0)) / 1024.0, "MiB", params);
  bench::emit("memory_over_time", "rss_peak_sampled_mib", double(peak_kib) / 1024.0, "MiB", params);
  bench::emit("memory_over_time", "live_after_mib", (live + trickle_bytes) / 1048576.0, "MiB", params);
  bench::emit("memory_over_time", "build_seconds", double(t_evict - t_build) / 1e9, "s", params);
  bench::emit("memory_over_time", "evict_seconds", double(t_evicted - t_evict) / 1e9, "s", params);
  bench::emit_peak_live("memory_over_time", peak_live + arrays, params);
  for (char* p : blocks) std::free(p);
  for (char* p : trickle) std::free(p);
}
