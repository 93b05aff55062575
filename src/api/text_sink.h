// A small text builder over a fixed buffer that flushes to a strata_write_fn
// sink: statistics are printed without allocating.
#pragma once

#include <cstddef>
#include <cstdint>

#include "strata/strata.h"

namespace strata::detail {

class TextSink {
 public:
  TextSink(strata_write_fn write, void* context) noexcept;
  ~TextSink() { flush(); }
  TextSink(const TextSink&) = delete;
  TextSink& operator=(const TextSink&) = delete;

  TextSink& text(const char* s) noexcept;
  TextSink& number(std::uint64_t value, int width = 0) noexcept;      // right-aligned
  TextSink& fixed(double value, int decimals) noexcept;
  TextSink& bytes(std::uint64_t value, int width = 0) noexcept;       // "12.3 MiB"
  TextSink& pad_to(int column) noexcept;                               // spaces up to a column
  void flush() noexcept;

 private:
  void put(char c) noexcept;

  strata_write_fn write_;
  void* context_;
  char buffer_[512];
  std::size_t used_ = 0;
  int column_ = 0;
};

}  // namespace strata::detail
