// deep-recursion (tests/e2e/parallel/unit_trees_test.py): two threads each recurse 150 levels
// deep, and every level calls leaf() 12 times before and 12 times after its callee, through a
// function pointer (a TIP packet each). The recursion is nearly all of each thread's trace and
// spans many PSBs, so decode units start and end inside it: calls still open at a unit's end,
// returns above the next unit's start.
#include <pthread.h>

#define NOINLINE __attribute__((noinline))

static volatile int sink;

NOINLINE static int leaf(int x) { return x * 3 + 1; }

static int (*volatile leaf_ptr)(int) = leaf;

NOINLINE static int descend(int depth) {
  int s = 0;
  for (int i = 0; i < 12; ++i) s += leaf_ptr(depth + i);
  if (depth > 0) s += descend(depth - 1);
  for (int i = 0; i < 12; ++i) s += leaf_ptr(depth - i);
  return s;
}

static void *worker(void *arg) {
  sink = descend((int)(long)arg);
  return 0;
}

int main(void) {
  pthread_t thread;
  pthread_create(&thread, 0, worker, (void *)150);
  sink = descend(150);
  pthread_join(thread, 0);
  return 0;
}
