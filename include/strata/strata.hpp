// strata/strata.hpp — every C++ facility of strata (each also has its own header).
//
//   strata::object_pool<T>            object_pool.hpp      single-threaded typed pool
//   strata::pooled<T>                 pooled.hpp           class-specific new/delete (CRTP)
//   strata::pool_allocator<T>         pool_allocator.hpp   Allocator for node containers
//   strata::pmr::general_resource()   pmr.hpp              memory_resource over strata_malloc
//   strata::pmr::pool_resource        pmr.hpp              unsynchronized pool resource
//   strata::pmr::synchronized_pool_resource  pmr.hpp       thread-safe pool resource
//   strata::concurrent_pool<Policy>   concurrent_pool.hpp  shared fixed-size pool: mutex,
//                                                          spinlock or lock-free policy
//   strata::thread_cached_pool        thread_cached_pool.hpp  per-thread free lists + depot
//   strata::spinlock                  spinlock.hpp         TTAS spinlock
#ifndef STRATA_STRATA_HPP
#define STRATA_STRATA_HPP

#include <strata/strata.h>

#include <strata/concurrent_pool.hpp>
#include <strata/object_pool.hpp>
#include <strata/pmr.hpp>
#include <strata/pool_allocator.hpp>
#include <strata/pooled.hpp>
#include <strata/spinlock.hpp>
#include <strata/thread_cached_pool.hpp>

#endif
