#include "override/cxx_runtime.h"

#include <cstddef>
#include <dlfcn.h>

#include "platform/os.h"

// Itanium C++ ABI names, exported alike by libstdc++ (libsupc++) and
// libc++abi, referenced weakly: the dynamic linker binds them to the
// process's C++ runtime when it is in our lookup scope (every C++ program:
// its runtime is a dependency of the executable) and leaves them null
// otherwise (C programs: no C++ runtime is loaded for our sake).
extern "C" {
void* strata_cxa_allocate_exception(std::size_t bytes) noexcept
    __asm__("__cxa_allocate_exception") __attribute__((weak));
[[noreturn]] void strata_cxa_throw(void* object, void* type, void (*destructor)(void*))
    __asm__("__cxa_throw") __attribute__((weak));
void strata_bad_alloc_destructor(void* object) noexcept
    __asm__("_ZNSt9bad_allocD1Ev") __attribute__((weak));
extern void* const strata_bad_alloc_vtable[] __asm__("_ZTVSt9bad_alloc") __attribute__((weak));
extern char strata_bad_alloc_typeinfo[] __asm__("_ZTISt9bad_alloc") __attribute__((weak));
strata::detail::NewHandler strata_get_new_handler() noexcept
    __asm__("_ZSt15get_new_handlerv") __attribute__((weak));
}

// The try/catch below makes the compiler reference the exception-handling
// runtime; weak too, so that this file adds no dependency. The catch can only
// be reached through that runtime's personality routine, so when these are
// null nothing ever jumps to the code that calls them.
asm(".weak __gxx_personality_v0\n\t"
    ".weak __cxa_begin_catch\n\t"
    ".weak __cxa_end_catch\n\t"
    ".weak _Unwind_Resume");

namespace strata::detail {

namespace {

// A C++ runtime symbol: the weak reference when it was bound, otherwise the
// symbol of a runtime loaded later into a local scope, e.g. by a C program
// that dlopen()s a C++ module (Python does, with RTLD_LOCAL): the module's
// operator new is ours, and its catch must get a real std::bad_alloc.
// RTLD_NOLOAD never loads anything. Only failure paths come here.
void* cxx_symbol(void* bound, const char* name) noexcept {
  if (bound != nullptr) return bound;
  static const char* const kRuntimes[] = {"libstdc++.so.6", "libc++abi.so.1", "libc++.so.1"};
  for (const char* library : kRuntimes) {
    void* handle = dlopen(library, RTLD_LAZY | RTLD_NOLOAD);
    if (handle == nullptr) continue;
    void* symbol = dlsym(handle, name);
    dlclose(handle);  // only drops our reference: the module that loaded it keeps it
    if (symbol != nullptr) return symbol;
  }
  return nullptr;
}

}  // namespace

NewHandler cxx_new_handler() noexcept {
  auto get = reinterpret_cast<NewHandler (*)() noexcept>(
      cxx_symbol(reinterpret_cast<void*>(&strata_get_new_handler), "_ZSt15get_new_handlerv"));
  return get != nullptr ? get() : nullptr;
}

bool cxx_call_new_handler_catching(NewHandler handler) noexcept {
  try {
    handler();
  } catch (...) {
    return false;
  }
  return true;
}

void cxx_throw_bad_alloc() {
  auto allocate_exception = reinterpret_cast<void* (*)(std::size_t) noexcept>(cxx_symbol(
      reinterpret_cast<void*>(&strata_cxa_allocate_exception), "__cxa_allocate_exception"));
  auto do_throw = reinterpret_cast<void (*)(void*, void*, void (*)(void*))>(
      cxx_symbol(reinterpret_cast<void*>(&strata_cxa_throw), "__cxa_throw"));
  auto destructor = reinterpret_cast<void (*)(void*)>(
      cxx_symbol(reinterpret_cast<void*>(&strata_bad_alloc_destructor), "_ZNSt9bad_allocD1Ev"));
  auto vtable = static_cast<void* const*>(
      cxx_symbol(const_cast<void**>(strata_bad_alloc_vtable), "_ZTVSt9bad_alloc"));
  void* type = cxx_symbol(strata_bad_alloc_typeinfo, "_ZTISt9bad_alloc");
  if (allocate_exception && do_throw && destructor && vtable && type) {
    // std::bad_alloc is one vtable pointer; the vtable's address point is
    // two words in (offset-to-top, then the type_info pointer).
    void* object = allocate_exception(sizeof(void*));
    *static_cast<void* const**>(object) = vtable + 2;
    do_throw(object, type, destructor);
  }
  os_fatal("out of memory in operator new, and no C++ runtime is loaded to throw std::bad_alloc");
}

}  // namespace strata::detail
