// setjmp: longjmp from three frames deep back to main (a return-less unwind).
#include <setjmp.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

static jmp_buf g_env;

NOINLINE void bail_out(int code) { longjmp(g_env, code); }
NOINLINE void inner(int x) {
  if (x > 0) bail_out(x);
}
NOINLINE void outer(int x) { inner(x + 1); }

NOINLINE int after_jump(int code) { return code * 10; }

int main(void) {
  int code = setjmp(g_env);
  if (code == 0) {
    outer(1);
    return 1;  // not reached
  }
  printf("setjmp %d\n", after_jump(code));
  return 0;
}
