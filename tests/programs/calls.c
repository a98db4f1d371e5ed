// calls: a fixed, nested call tree (see README.md). Built -O0 so every call is real.
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

NOINLINE int leaf_a(int x) { return x + 1; }
NOINLINE int leaf_b(int x) { return x * 2; }
NOINLINE int leaf_c(int x) { return x - 3; }

NOINLINE int middle_one(int x) { return leaf_a(x) + leaf_b(x); }
NOINLINE int middle_two(int x) { return leaf_c(middle_one(x)); }

NOINLINE int top(int x) {
  int sum = middle_one(x);
  sum += middle_two(x);
  sum += leaf_a(sum);
  return sum;
}

int main(void) {
  int result = top(5);
  printf("calls %d\n", result);
  return 0;
}
