// A target for attach tests. `thread_churn churn`: threads start and exit all the time, so some
// listed thread is always gone by the time a recorder opens its events. `thread_churn many N`: N
// threads that sleep. Either way it writes "ready" on stdout once running, and runs until killed.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void* Sleep(void* arg) {
  (void)arg;
  for (;;) pause();
  return NULL;
}

static void* Brief(void* arg) {
  (void)arg;
  usleep(200);
  return NULL;
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "many") == 0) {
    const int n = atoi(argv[2]);
    for (int i = 0; i < n; ++i) {
      pthread_t t;
      pthread_create(&t, NULL, Sleep, NULL);
    }
    printf("ready\n");
    fflush(stdout);
    for (;;) pause();
  }
  printf("ready\n");
  fflush(stdout);
  for (;;) {
    pthread_t threads[64];
    for (int i = 0; i < 64; ++i) pthread_create(&threads[i], NULL, Brief, NULL);
    for (int i = 0; i < 64; ++i) pthread_join(threads[i], NULL);
  }
}
