// Reports of misuse: invalid frees (a pointer strata never returned, an
// interior pointer), double frees, writes past the end or after free. Every
// report prints the address, the size class and what was wrong on stderr,
// then aborts, in the default mode as in checking mode (glibc's behaviour:
// a program that moves from glibc to strata keeps that protection). What each
// mode catches: docs/reliability.md.
#pragma once

namespace strata::detail {

[[noreturn]] void report_misuse(const void* block, const char* what) noexcept;

}  // namespace strata::detail
