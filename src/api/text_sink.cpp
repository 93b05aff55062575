#include "api/text_sink.h"

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
    : TextWriter(&write_to, this), write_(write != nullptr ? write : write_to_stderr), write_context_(context) {}

bool TextSink::write_to(void* self, const char* data, std::size_t length) noexcept {
  auto* sink = static_cast<TextSink*>(self);
  sink->write_(sink->write_context_, data, length);
  return true;
}

}  // namespace strata::detail
