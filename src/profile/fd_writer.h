// Text output to a file descriptor through write(2) (platform/text_writer.h
// formats it): the profile writers never allocate.
#pragma once

#include "platform/text_writer.h"

namespace strata::detail {

class FdWriter : public TextWriter {
 public:
  explicit FdWriter(int fd) noexcept : TextWriter(&write_all, this), fd_(fd) {}
  ~FdWriter() { flush(); }  // while fd_ is still ours

  int error() const noexcept { return error_; }  // errno of the write that failed

 private:
  static bool write_all(void* self, const char* data, std::size_t length) noexcept;

  int fd_;
  int error_ = 0;
};

}  // namespace strata::detail
