// threads: three pthreads, each running a distinct function; main joins them in order.
#include <pthread.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

NOINLINE int work_alpha(int x) { return x + 1; }
NOINLINE int work_beta(int x) { return x * 2; }
NOINLINE int work_gamma(int x) { return x - 1; }

static void* run_alpha(void* arg) { return (void*)(long)work_alpha((int)(long)arg); }
static void* run_beta(void* arg) { return (void*)(long)work_beta((int)(long)arg); }
static void* run_gamma(void* arg) { return (void*)(long)work_gamma((int)(long)arg); }

int main(void) {
  void* (*const bodies[3])(void*) = {run_alpha, run_beta, run_gamma};
  pthread_t threads[3];
  for (long i = 0; i < 3; ++i) {
    if (pthread_create(&threads[i], NULL, bodies[i], (void*)(i + 10)) != 0) return 1;
  }
  long sum = 0;
  for (int i = 0; i < 3; ++i) {
    void* value = NULL;
    pthread_join(threads[i], &value);
    sum += (long)value;
  }
  printf("threads %ld\n", sum);
  return 0;
}
