// percpu-workers: main and three workers take turns on one mutex (100 rounds each, ~25
// instructions held). Under pt-emulate --cpus with a small --timeslice a thread is often
// preempted while it holds the lock, so the others block in futex_wait until it runs again: the
// scheduler must switch blocked threads out and keep the holder runnable, or the run deadlocks.
#include <pthread.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static long counter;

NOINLINE static void add_under_lock(long id) {
  pthread_mutex_lock(&lock);
  for (volatile int k = 0; k < 3; ++k) counter += id;
  pthread_mutex_unlock(&lock);
}

static void* worker(void* arg) {
  for (int i = 0; i < 100; ++i) add_under_lock((long)arg);
  return NULL;
}

int main(void) {
  pthread_t threads[3];
  for (long i = 0; i < 3; ++i) {
    if (pthread_create(&threads[i], NULL, worker, (void*)(i + 1)) != 0) return 1;
  }
  worker((void*)4);
  for (int i = 0; i < 3; ++i) pthread_join(threads[i], NULL);
  printf("workers %ld\n", counter);  // 3 * 100 * (1 + 2 + 3 + 4) = 3000
  return counter == 3000 ? 0 : 1;
}
