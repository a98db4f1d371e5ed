// tailcall: -O2 turns `return finish(...)` into a jmp to another function (a tail call).
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

NOINLINE int finish(int x) { return x * 3 + 1; }

// Ends in `jmp finish` at -O2: the tail call the decoder must show as replacing this frame.
NOINLINE int prepare(int x) { return finish(x + 4); }

// A chain: step_one tail-calls step_two, which tail-calls finish.
NOINLINE int step_two(int x) { return finish(x ^ 5); }
NOINLINE int step_one(int x) { return step_two(x + 2); }

int main(int argc, char** argv) {
  (void)argv;
  int a = prepare(argc);
  int b = step_one(argc);
  printf("tailcall %d %d\n", a, b);
  return 0;
}
