/* Prints strata's view of its options after reading the environment. */
#include <stdio.h>
#include <stdlib.h>
#include <strata/strata.h>

int main(void) {
  free(malloc(16)); /* the first allocation reads the environment */
  printf("thread_cache_bytes=%ld decay_ms=%ld background=%ld huge=%ld check=%ld verbose=%ld profile_sample=%ld\n",
         strata_option_get(STRATA_OPTION_THREAD_CACHE_BYTES), strata_option_get(STRATA_OPTION_DECAY_MS),
         strata_option_get(STRATA_OPTION_BACKGROUND_THREAD), strata_option_get(STRATA_OPTION_HUGE_PAGES),
         strata_option_get(STRATA_OPTION_CHECK), strata_option_get(STRATA_OPTION_VERBOSE),
         strata_option_get(STRATA_OPTION_PROFILE_SAMPLE));
  return 0;
}
