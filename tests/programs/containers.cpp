// A C++ program that knows nothing of strata: standard containers from four
// threads, printing a deterministic summary. tests/override runs it with and
// without libstrata.so preloaded and compares the output.
#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <deque>
#include <list>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace {

std::uint64_t mix(std::uint64_t h, std::uint64_t v) { return (h ^ v) * 0x100000001B3ull; }

std::uint64_t workload(unsigned seed) {
  std::mt19937_64 rng(seed);
  std::uint64_t h = 0xcbf29ce484222325ull;

  std::unordered_map<std::string, std::vector<int>> index;
  for (int i = 0; i < 200000; ++i) {
    std::string key = "key" + std::to_string(rng() % 50000);
    index[key].push_back(i);
    if (i % 7 == 0) index.erase("key" + std::to_string(rng() % 50000));
  }
  std::vector<std::string> keys;
  for (auto& [k, v] : index) keys.push_back(k + ":" + std::to_string(v.size()));
  std::sort(keys.begin(), keys.end());
  for (auto& k : keys) for (char c : k) h = mix(h, static_cast<unsigned char>(c));

  std::map<std::uint64_t, std::unique_ptr<std::string>> tree;
  for (int i = 0; i < 100000; ++i) {
    tree.emplace(rng() % 100000, std::make_unique<std::string>(rng() % 300, 'a' + i % 26));
    if (i % 3 == 0 && !tree.empty()) tree.erase(tree.begin());
  }
  for (auto& [k, v] : tree) h = mix(h, k ^ v->size());

  std::list<std::vector<double>> chunks;
  std::deque<std::set<int>> sets;
  for (int i = 0; i < 20000; ++i) {
    chunks.emplace_back(rng() % 2000, 1.5 * i);
    if (chunks.size() > 100) chunks.pop_front();
    sets.emplace_back();
    for (int j = 0; j < 20; ++j) sets.back().insert(static_cast<int>(rng() % 1000));
    if (sets.size() > 500) sets.pop_front();
  }
  for (auto& c : chunks) h = mix(h, c.size());
  for (auto& s : sets) h = mix(h, s.size() + static_cast<std::uint64_t>(*s.begin()));

  std::vector<std::shared_ptr<std::vector<char>>> shared;
  for (int i = 0; i < 5000; ++i) {
    shared.push_back(std::make_shared<std::vector<char>>(1 + rng() % (1 << 16), static_cast<char>(i)));
    if (i % 2) shared[rng() % shared.size()].reset();
  }
  for (auto& p : shared) h = mix(h, p ? p->size() : 0);
  return h;
}

}  // namespace

int main() {
  std::uint64_t results[4] = {};
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < 4; ++t) threads.emplace_back([&results, t] { results[t] = workload(t + 1); });
  for (auto& t : threads) t.join();
  for (unsigned t = 0; t < 4; ++t)
    std::printf("thread %u: %016llx\n", t, static_cast<unsigned long long>(results[t]));
  return 0;
}
