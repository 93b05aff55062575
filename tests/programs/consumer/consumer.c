/* Links against an installed libstrata (CMake package or pkg-config) and
 * checks that both the strata_* API and the malloc it replaces work. */
#define _GNU_SOURCE
#include <strata/strata.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void) {
  char* p = strata_malloc(100);
  if (!p || strata_usable_size(p) < 100) return 1;
  strcpy(p, "strata");
  p = strata_realloc(p, 5000);
  if (!p || strcmp(p, "strata") != 0) return 2;
  strata_free(p);

  /* Linked with libstrata.so, malloc is strata's: its pointers are strata's. */
  void* q = malloc(64);
  if (!q || strata_usable_size(q) < 64) return 3;
  free(q);
  Dl_info info;
  if (!dladdr((void*)dlsym(RTLD_DEFAULT, "malloc"), &info) || !strstr(info.dli_fname, "libstrata")) {
    fprintf(stderr, "malloc comes from %s, not libstrata\n", info.dli_fname ? info.dli_fname : "?");
    return 4;
  }
  printf("consumer OK: malloc from %s\n", info.dli_fname);
  return 0;
}
