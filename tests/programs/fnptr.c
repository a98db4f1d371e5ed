// fnptr: indirect calls through a table of function pointers (TIP for every call target).
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

NOINLINE int op_add(int a, int b) { return a + b; }
NOINLINE int op_sub(int a, int b) { return a - b; }
NOINLINE int op_mul(int a, int b) { return a * b; }

typedef int (*BinaryOp)(int, int);

// volatile so the compiler cannot turn the indirect calls into direct ones.
static BinaryOp volatile kOps[3] = {op_add, op_sub, op_mul};

NOINLINE int apply_all(int a, int b) {
  int total = 0;
  for (int i = 0; i < 3; ++i) total += kOps[i](a, b);
  return total;
}

int main(void) {
  printf("fnptr %d\n", apply_all(7, 3));
  return 0;
}
