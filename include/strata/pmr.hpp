// strata/pmr.hpp — strata's std::pmr memory resources.
#ifndef STRATA_PMR_HPP
#define STRATA_PMR_HPP

#include <strata/pmr_general_resource.hpp>
#include <strata/pmr_pool_resource.hpp>
#include <strata/pmr_synchronized_pool_resource.hpp>

#endif
