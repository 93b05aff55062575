#include "profile/fd_writer.h"

#include <cerrno>
#include <unistd.h>

namespace strata::detail {

bool FdWriter::write_all(void* self, const char* data, std::size_t length) noexcept {
  auto* writer = static_cast<FdWriter*>(self);
  while (length > 0) {
    ssize_t n = write(writer->fd_, data, length);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      writer->error_ = n < 0 ? errno : EIO;
      return false;
    }
    data += n;
    length -= static_cast<std::size_t>(n);
  }
  return true;
}

}  // namespace strata::detail
