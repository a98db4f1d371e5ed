// A target that runs until it is killed, for killing pt-emulate at any instant: calls through a
// few functions, and after a while maps a library it did not have at start (dlopen) and calls
// into it, so that a cut capture needs sideband written while it ran. With an argument N it exits
// after N iterations (the dlopen after N/3), so that pt-emulate's final flush can be killed too.
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>

static volatile double sink;

__attribute__((noinline)) static int Leaf(int x) { return x * 3 + 1; }
__attribute__((noinline)) static int Middle(int x) { return Leaf(x) + Leaf(x + 1); }

int main(int argc, char** argv) {
  const long iterations = argc > 1 ? atol(argv[1]) : -1;
  const long load_at = iterations > 0 ? iterations / 3 : 20000;
  double (*cosine)(double) = NULL;
  for (long i = 0; i != iterations; ++i) {
    sink += Middle((int)(i & 1023));
    if (i == load_at) {
      void* libm = dlopen("libm.so.6", RTLD_NOW);
      if (libm != NULL) cosine = (double (*)(double))dlsym(libm, "cos");
    }
    if (cosine != NULL) sink += cosine((double)(i & 7));
  }
  return 0;
}
