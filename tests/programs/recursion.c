// recursion: recurse() calls itself 100 deep (deeper than the 64-entry return-compression stack).
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

NOINLINE int recurse(int depth) {
  if (depth == 0) return 0;
  return 1 + recurse(depth - 1);
}

int main(void) {
  int depth = recurse(100);
  printf("recursion %d\n", depth);
  return 0;
}
