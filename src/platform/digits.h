// Numbers as text without printf (which may allocate): the one digit loop
// every writer of strata's (stderr, statistics, heap profiles) shares.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata::detail {

// Writes `value` in `base` (10 or 16, lower-case) into the end of `buffer`
// (at least 24 bytes) and returns where the digits start; they run to
// buffer + 24 (not NUL-terminated).
inline char* digits_of(std::uint64_t value, unsigned base, char (&buffer)[24]) noexcept {
  char* p = buffer + sizeof(buffer);
  do {
    unsigned digit = static_cast<unsigned>(value % base);
    *--p = static_cast<char>(digit < 10 ? '0' + digit : 'a' + digit - 10);
    value /= base;
  } while (value != 0);
  return p;
}

}  // namespace strata::detail
