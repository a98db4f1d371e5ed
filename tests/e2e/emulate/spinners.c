// Four threads that run at once (three pthreads and main, each in its own loop), for checking
// that pt-emulate --max-instructions N stops at exactly N while other threads have steps in
// flight. Bounded, so that the untraced rest ends quickly once pt-emulate detaches.
#include <pthread.h>

static volatile long counters[4];

__attribute__((noinline)) static void Spin(long index) {
  for (long i = 0; i < 20000000; ++i) counters[index] += i & 3;
}

static void* Run(void* arg) {
  Spin((long)arg);
  return 0;
}

int main(void) {
  pthread_t threads[3];
  for (long i = 0; i < 3; ++i) pthread_create(&threads[i], 0, Run, (void*)i);
  Spin(3);
  for (int i = 0; i < 3; ++i) pthread_join(threads[i], 0);
  return 0;
}
