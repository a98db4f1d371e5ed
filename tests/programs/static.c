// static: the calls tree in a -static binary (no ld.so, no shared libc).
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

NOINLINE int leaf_a(int x) { return x + 1; }
NOINLINE int leaf_b(int x) { return x * 2; }
NOINLINE int middle(int x) { return leaf_a(x) + leaf_b(x); }

int main(void) {
  int result = middle(3);
  (void)!write(1, "static\n", 7);
  return result == 10 ? 0 : 1;
}
