#include "platform/text_writer.h"

#include "platform/digits.h"

namespace strata::detail {

bool TextWriter::flush() noexcept {
  if (used_ != 0 && ok_) ok_ = sink_(context_, buffer_, used_);
  used_ = 0;
  return ok_;
}

TextWriter& TextWriter::text(const char* s) noexcept {
  while (*s != '\0') put(*s++);
  return *this;
}

TextWriter& TextWriter::bytes(const char* data, std::size_t length) noexcept {
  for (std::size_t i = 0; i < length; ++i) put(data[i]);
  return *this;
}

TextWriter& TextWriter::number(std::uint64_t value, int width) noexcept {
  char buffer[24];
  const char* p = digits_of(value, 10, buffer);
  for (int i = static_cast<int>(buffer + sizeof(buffer) - p); i < width; ++i) put(' ');
  while (p < buffer + sizeof(buffer)) put(*p++);
  return *this;
}

TextWriter& TextWriter::hex(std::uint64_t value) noexcept {
  char buffer[24];
  const char* p = digits_of(value, 16, buffer);
  put('0').put('x');
  while (p < buffer + sizeof(buffer)) put(*p++);
  return *this;
}

TextWriter& TextWriter::fixed(double value, int decimals, int width) noexcept {
  bool negative = value < 0;
  if (negative) value = -value;
  std::uint64_t scale = 1;
  for (int i = 0; i < decimals; ++i) scale *= 10;
  auto scaled = static_cast<std::uint64_t>(value * static_cast<double>(scale) + 0.5);
  std::uint64_t whole = scaled / scale;
  int length = (negative ? 1 : 0) + (decimals > 0 ? decimals + 1 : 0);
  for (std::uint64_t t = whole;; t /= 10) {
    ++length;
    if (t < 10) break;
  }
  for (int i = length; i < width; ++i) put(' ');
  if (negative) put('-');
  number(whole);
  if (decimals > 0) {
    put('.');
    std::uint64_t fraction = scaled % scale;
    for (std::uint64_t div = scale / 10; div > 0; div /= 10) {
      put(static_cast<char>('0' + fraction / div));
      fraction %= div;
    }
  }
  return *this;
}

TextWriter& TextWriter::size(double bytes, int width) noexcept {
  static const char* const kUnits[] = {" B", " KiB", " MiB", " GiB", " TiB"};
  int unit = 0;
  while (bytes >= 1024.0 && unit < 4) {
    bytes /= 1024.0;
    ++unit;
  }
  int unit_length = unit == 0 ? 2 : 4;
  fixed(bytes, unit == 0 ? 0 : 1, width > unit_length ? width - unit_length : 0);
  return text(kUnits[unit]);
}

TextWriter& TextWriter::pad_to(int column) noexcept {
  while (column_ < column) put(' ');
  return *this;
}

}  // namespace strata::detail
