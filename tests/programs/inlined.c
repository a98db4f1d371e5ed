// inlined: -O2 with always_inline helpers inside a noinline function (for the symbolizer).
#include <stdio.h>

#define NOINLINE __attribute__((noinline))
#define ALWAYS_INLINE static inline __attribute__((always_inline))

ALWAYS_INLINE int inner_scale(int x) { return x * 3 + 1; }
ALWAYS_INLINE int outer_mix(int x) { return inner_scale(x) ^ (x >> 1); }

NOINLINE int compute(int x) {
  int total = 0;
  for (int i = 0; i < 4; ++i) total += outer_mix(x + i);
  return total;
}

int main(int argc, char** argv) {
  (void)argv;
  printf("inlined %d\n", compute(argc));
  return 0;
}
