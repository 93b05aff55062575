// Text built in a fixed buffer and handed to a sink in chunks, without
// allocating: the statistics table (api/text_sink.h, to a strata_write_fn)
// and the heap profiles (profile/fd_writer.h, to a file descriptor) share
// this one formatter and differ only in where the bytes go.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::detail {

class TextWriter {
 public:
  // Takes `length` bytes of output; false when they could not be written
  // (the writer then drops everything after).
  using Sink = bool (*)(void* context, const char* data, std::size_t length) noexcept;

  TextWriter(Sink sink, void* context) noexcept : sink_(sink), context_(context) {}
  ~TextWriter() { flush(); }
  TextWriter(const TextWriter&) = delete;
  TextWriter& operator=(const TextWriter&) = delete;

  TextWriter& put(char c) noexcept {
    if (used_ == sizeof(buffer_)) flush();
    buffer_[used_++] = c;
    column_ = c == '\n' ? 0 : column_ + 1;
    return *this;
  }
  TextWriter& text(const char* s) noexcept;
  TextWriter& bytes(const char* data, std::size_t length) noexcept;
  TextWriter& number(std::uint64_t value, int width = 0) noexcept;  // decimal, right-aligned
  TextWriter& hex(std::uint64_t value) noexcept;                    // 0x...
  TextWriter& fixed(double value, int decimals, int width = 0) noexcept;
  TextWriter& size(double bytes, int width = 0) noexcept;           // "12.3 MiB", right-aligned
  TextWriter& pad_to(int column) noexcept;                          // spaces up to a column

  // Hands the buffer to the sink; false once the sink failed.
  bool flush() noexcept;
  bool ok() const noexcept { return ok_; }

 private:
  Sink sink_;
  void* context_;
  bool ok_ = true;
  int column_ = 0;
  std::size_t used_ = 0;
  char buffer_[2048];
};

}  // namespace strata::detail
