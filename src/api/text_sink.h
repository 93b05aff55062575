// Text for a strata_write_fn (the statistics table and JSON), formatted by
// platform/text_writer.h: statistics are printed without allocating. A null
// function writes to stderr.
#pragma once

#include "platform/text_writer.h"
#include "strata/strata.h"

namespace strata::detail {

class TextSink : public TextWriter {
 public:
  TextSink(strata_write_fn write, void* context) noexcept;
  ~TextSink() { flush(); }  // while write_ is still ours

 private:
  static bool write_to(void* self, const char* data, std::size_t length) noexcept;

  strata_write_fn write_;
  void* write_context_;
};

}  // namespace strata::detail
