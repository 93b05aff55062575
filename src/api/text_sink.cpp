#include "api/text_sink.h"

#include "platform/digits.h"

#include "platform/os.h"

namespace strata::detail {

namespace {
void write_to_stderr(void*, const char* text, std::size_t length) noexcept {
  char chunk[257];
  while (length > 0) {
    std::size_t n = length < 256 ? length : 256;
    for (std::size_t i = 0; i < n; ++i) chunk[i] = text[i];
    chunk[n] = '\0';
    os_write_stderr(chunk);
    text += n;
    length -= n;
  }
}
}  // namespace

TextSink::TextSink(strata_write_fn write, void* context) noexcept
    : write_(write != nullptr ? write : write_to_stderr), context_(context) {}

void TextSink::put(char c) noexcept {
  if (used_ == sizeof(buffer_)) flush();
  buffer_[used_++] = c;
  column_ = c == '\n' ? 0 : column_ + 1;
}

void TextSink::flush() noexcept {
  if (used_ != 0) write_(context_, buffer_, used_);
  used_ = 0;
}

TextSink& TextSink::text(const char* s) noexcept {
  while (*s) put(*s++);
  return *this;
}

TextSink& TextSink::number(std::uint64_t value, int width) noexcept {
  char buffer[24];
  const char* p = digits_of(value, 10, buffer);
  for (int i = static_cast<int>(buffer + sizeof(buffer) - p); i < width; ++i) put(' ');
  while (p < buffer + sizeof(buffer)) put(*p++);
  return *this;
}

TextSink& TextSink::fixed(double value, int decimals) noexcept {
  if (value < 0) {
    put('-');
    value = -value;
  }
  std::uint64_t scale = 1;
  for (int i = 0; i < decimals; ++i) scale *= 10;
  auto scaled = static_cast<std::uint64_t>(value * static_cast<double>(scale) + 0.5);
  number(scaled / scale);
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

TextSink& TextSink::bytes(std::uint64_t value, int width) noexcept {
  static const char* const kUnits[] = {" B", " KiB", " MiB", " GiB", " TiB"};
  double v = static_cast<double>(value);
  int unit = 0;
  while (v >= 1024.0 && unit < 4) {
    v /= 1024.0;
    ++unit;
  }
  // Width applies to the whole "12.3 MiB" field: pre-pad by estimate.
  int digits = 1;
  for (double t = v; t >= 10.0; t /= 10.0) ++digits;
  int length = digits + (unit == 0 ? 0 : 2) + (unit == 0 ? 2 : 4);
  for (int i = length; i < width; ++i) put(' ');
  if (unit == 0) number(value);
  else fixed(v, 1);
  return text(kUnits[unit]);
}

TextSink& TextSink::pad_to(int column) noexcept {
  while (column_ < column) put(' ');
  return *this;
}

}  // namespace strata::detail
