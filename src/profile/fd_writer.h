// Text output to a file descriptor through a fixed buffer and write(2): the
// profile writers never allocate.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::detail {

class FdWriter {
 public:
  explicit FdWriter(int fd) noexcept : fd_(fd) {}
  ~FdWriter() { flush(); }
  FdWriter(const FdWriter&) = delete;
  FdWriter& operator=(const FdWriter&) = delete;

  FdWriter& text(const char* s) noexcept;
  FdWriter& bytes(const char* data, std::size_t length) noexcept;
  FdWriter& number(std::uint64_t value, int width = 0) noexcept;  // decimal, right-aligned
  FdWriter& hex(std::uint64_t value) noexcept;                    // 0x...
  FdWriter& fixed(double value, int decimals, int width = 0) noexcept;
  FdWriter& size(double bytes, int width = 0) noexcept;           // "12.3 MiB"
  FdWriter& put(char c) noexcept {
    if (used_ == sizeof(buffer_)) flush();
    buffer_[used_++] = c;
    return *this;
  }
  // False once a write failed (errno kept from that write).
  bool flush() noexcept;
  bool ok() const noexcept { return ok_; }
  int error() const noexcept { return error_; }

 private:
  int fd_;
  bool ok_ = true;
  int error_ = 0;
  std::size_t used_ = 0;
  char buffer_[2048];
};

}  // namespace strata::detail
