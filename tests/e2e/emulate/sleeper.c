// pt-emulate --clock real (issue #27): a pure computation, a 200 ms nanosleep, the same
// computation again. Under the real clock the sleep's slice spans >= 200 ms while each
// computation keeps its virtual duration; under the default virtual clock the sleep is a few
// hundred nanoseconds of instructions.
#include <time.h>

__attribute__((noinline)) unsigned compute(unsigned n) {
  volatile unsigned sum = 0;
  for (unsigned i = 0; i < n; i++) sum += i * 7;
  return sum;
}

__attribute__((noinline)) void pause_200ms(void) {
  struct timespec ts = {0, 200000000};
  while (nanosleep(&ts, &ts) != 0) {
  }
}

int main(void) {
  unsigned r = compute(5000);
  pause_200ms();
  r += compute(5000);
  return r == 1;
}
