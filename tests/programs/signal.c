// signal: raise(SIGUSR1) runs a handler that calls a function; then execution resumes in main.
#include <signal.h>
#include <stdio.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

static volatile sig_atomic_t g_handled = 0;

NOINLINE void in_handler(int signo) { g_handled = signo; }
NOINLINE void on_signal(int signo) { in_handler(signo); }
NOINLINE int after_signal(void) { return g_handled; }

int main(void) {
  struct sigaction action;
  memset(&action, 0, sizeof action);
  action.sa_handler = on_signal;
  sigaction(SIGUSR1, &action, NULL);
  raise(SIGUSR1);
  printf("signal %d\n", after_signal());
  return 0;
}
