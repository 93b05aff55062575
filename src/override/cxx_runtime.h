// The C++ runtime pieces that operator new's failure protocol needs (the
// new_handler, std::bad_alloc), reached at run time instead of through a
// link-time dependency on libstdc++.
//
// Why: a DT_NEEDED libstdc++ (with libm and libgcc_s behind it) costs every
// process that preloads strata about 1.5 MB of resident memory and a
// malloc from libstdc++'s start-up, C programs included, which never call
// operator new. A process that does call operator new has a C++ runtime
// loaded; these functions find it.
#pragma once

namespace strata::detail {

using NewHandler = void (*)();

// The program's new_handler (std::get_new_handler), or nullptr when there is
// none or no C++ runtime is loaded (then nobody can have installed one).
NewHandler cxx_new_handler() noexcept;

// Calls `handler`; false when it threw (the nothrow operators then return
// null, as the standard's nothrow new does).
bool cxx_call_new_handler_catching(NewHandler handler) noexcept;

// Throws std::bad_alloc through the process's C++ runtime. Without one
// (nothing could catch it) prints a message and aborts.
[[noreturn]] void cxx_throw_bad_alloc();

}  // namespace strata::detail
