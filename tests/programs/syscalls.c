// syscalls: write, getpid and a zero nanosleep, each wrapped in its own function.
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

NOINLINE void do_write(void) { (void)!write(1, "syscalls\n", 9); }
NOINLINE int do_getpid(void) { return (int)getpid(); }
NOINLINE void do_sleep(void) {
  struct timespec zero = {0, 0};
  nanosleep(&zero, NULL);
}

int main(void) {
  do_write();
  int pid = do_getpid();
  do_sleep();
  return pid > 0 ? 0 : 1;
}
