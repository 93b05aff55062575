/* Commits one kind of heap misuse, chosen by argv[1] ("busy-<kind>": after
 * the thread has become busy); strata must report it and abort (the checks
 * of checking mode with STRATA_CHECK=1, double and invalid frees in the
 * default mode too). Linked with libstrata.a. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void* block_for_thread;

static void* free_in_thread(void* arg) {
  (void)arg;
  free(block_for_thread);
  return NULL;
}

/* A thread that allocates this much gets a cache of its own (frees of its
 * blocks then take the fast path, where the free mark is checked). */
static void become_busy(void) {
  static void* blocks[4096];
  for (int i = 0; i < 4096; ++i) blocks[i] = malloc(40);
  for (int i = 0; i < 4096; ++i) free(blocks[i]);
}

/* A thread with a cache of its own frees an interior pointer into a block
 * of another thread's span: the remote free's short route (the page's
 * owner tag names the other thread) must still check the block's start. */
static void* free_interior_in_busy_thread(void* arg) {
  (void)arg;
  become_busy();
  free((char*)block_for_thread + 16);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc < 2) return 2;
  const char* what = argv[1];
  if (strncmp(what, "busy-", 5) == 0) {
    become_busy();
    what += 5;
  }
  char* p = malloc(40);
  char* volatile keep = p;
  if (strcmp(what, "double-free") == 0) {
    free(p);
    free(keep);
    /* A busy thread's double free is caught when the block would be handed
     * out a second time (or when its span empties): keep allocating. */
    for (int i = 0; i < 1000; ++i) malloc(40);
  } else if (strcmp(what, "double-free-large") == 0) {
    char* big = malloc(1 << 20);
    free(big);
    free(big);
  } else if (strcmp(what, "double-free-remote") == 0) {
    /* Freed by another thread, then again here. */
    block_for_thread = p;
    pthread_t t;
    pthread_create(&t, NULL, free_in_thread, NULL);
    pthread_join(t, NULL);
    free(keep);
    /* The second free reaches the owner's inbox; the owner's next slow path
     * finds the block already in its span. */
    for (int i = 0; i < 100000; ++i) free(malloc(40));
  } else if (strcmp(what, "foreign") == 0) {
    static char not_from_malloc[64];
    free(not_from_malloc);
  } else if (strcmp(what, "interior") == 0) {
    free(p + 16);
  } else if (strcmp(what, "interior-remote") == 0) {
    block_for_thread = p;
    pthread_t t;
    pthread_create(&t, NULL, free_interior_in_busy_thread, NULL);
    pthread_join(t, NULL);
  } else if (strcmp(what, "overflow") == 0) {
    memset(p, 0x41, 41);
    free(p);
  } else if (strcmp(what, "overflow-far") == 0) {
    char* q = malloc(20); /* 20 + 9 <= 32: canary bytes from byte 20 on */
    q[20] = 1;
    free(q);
  } else if (strcmp(what, "canary-after-every-size") == 0) {
    /* Not a misuse: the byte right after the requested size must be a
     * canary byte for every size, so that any one-byte overrun is caught
     * whatever the secret is. */
    for (size_t n = 0; n <= 70000; n += n < 4200 ? 1 : 997) {
      unsigned char* b = malloc(n);
      if (b[n] != 0xcb) {
        printf("no canary right after %zu bytes\n", n);
        return 3;
      }
      free(b);
    }
  } else if (strcmp(what, "use-after-free") == 0) {
    free(p);
    keep[24] = 7; /* a write into the freed block's poison */
    for (int i = 0; i < 4; ++i) free(malloc(40));
  } else if (strcmp(what, "none") == 0) {
    free(p);
  } else {
    return 2;
  }
  puts("no misuse detected");
  return 0;
}
