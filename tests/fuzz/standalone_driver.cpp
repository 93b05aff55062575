// A plain main() for builds without libFuzzer (g++): runs every corpus file
// once, then random and mutated inputs until the time bound, and prints how
// many executions it ran.
//   strata_fuzz_driver [-seconds=N] [-max_len=N] [-seed=N] [corpus dirs or files...]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size);

namespace {

using Input = std::vector<std::uint8_t>;

Input read_file(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return Input(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

void collect(const std::filesystem::path& path, std::vector<Input>& corpus) {
  if (std::filesystem::is_directory(path)) {
    for (const auto& entry : std::filesystem::directory_iterator(path))
      if (entry.is_regular_file()) corpus.push_back(read_file(entry.path()));
  } else {
    corpus.push_back(read_file(path));
  }
}

// A mutation of a corpus entry: flip bytes, insert, erase or splice.
Input mutate(const std::vector<Input>& corpus, std::mt19937_64& rng, std::size_t max_len) {
  Input out = corpus.empty() ? Input{} : corpus[rng() % corpus.size()];
  int edits = 1 + static_cast<int>(rng() % 8);
  for (int e = 0; e < edits; ++e) {
    switch (rng() % 4) {
      case 0:
        if (!out.empty()) out[rng() % out.size()] ^= static_cast<std::uint8_t>(1u << (rng() % 8));
        break;
      case 1:
        out.insert(out.begin() + static_cast<std::ptrdiff_t>(out.empty() ? 0 : rng() % out.size()),
                   static_cast<std::uint8_t>(rng()));
        break;
      case 2:
        if (!out.empty()) out.erase(out.begin() + static_cast<std::ptrdiff_t>(rng() % out.size()));
        break;
      default:
        if (!corpus.empty()) {
          const Input& other = corpus[rng() % corpus.size()];
          if (!other.empty()) {
            std::size_t from = rng() % other.size();
            out.insert(out.end(), other.begin() + static_cast<std::ptrdiff_t>(from), other.end());
          }
        }
    }
  }
  if (out.size() > max_len) out.resize(max_len);
  return out;
}

Input random_input(std::mt19937_64& rng, std::size_t max_len) {
  Input out(1 + rng() % max_len);
  for (auto& b : out) b = static_cast<std::uint8_t>(rng());
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 10;
  std::size_t max_len = 1024;
  std::uint64_t seed = std::random_device{}();
  std::vector<Input> corpus;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("-seconds=", 0) == 0) seconds = std::atof(a.c_str() + 9);
    else if (a.rfind("-max_len=", 0) == 0) max_len = std::strtoull(a.c_str() + 9, nullptr, 10);
    else if (a.rfind("-seed=", 0) == 0) seed = std::strtoull(a.c_str() + 6, nullptr, 10);
    else collect(a, corpus);
  }
  if (max_len == 0) max_len = 1;
  std::fprintf(stderr, "strata fuzz driver: %zu corpus inputs, %.0f s, seed %llu\n", corpus.size(), seconds,
               static_cast<unsigned long long>(seed));
  auto start = std::chrono::steady_clock::now();
  std::uint64_t corpus_runs = 0, generated_runs = 0;
  for (const Input& in : corpus) {
    LLVMFuzzerTestOneInput(in.data(), in.size());
    ++corpus_runs;
  }
  std::mt19937_64 rng(seed);
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  while (elapsed() < seconds) {
    Input in = rng() % 4 == 0 ? random_input(rng, max_len) : mutate(corpus, rng, max_len);
    LLVMFuzzerTestOneInput(in.data(), in.size());
    ++generated_runs;
  }
  std::printf("executions: %llu (corpus %llu, generated %llu) in %.1f s, no model violation\n",
              static_cast<unsigned long long>(corpus_runs + generated_runs),
              static_cast<unsigned long long>(corpus_runs), static_cast<unsigned long long>(generated_runs),
              elapsed());
  return 0;
}
