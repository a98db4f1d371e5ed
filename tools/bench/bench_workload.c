// The bench's real program (scripts/bench records it with pt-emulate). Issue #26 states its targets
// on a real-PT capture of "a static program with qsort callbacks, snprintf, hashing and recursion,
// 300 runs of main": this is such a program, so that the bench can time one like it on a machine
// without PT. Each run formats a batch of order keys with snprintf, hashes them (FNV-1a), sorts them
// twice through qsort (its comparators are called back from glibc), then folds them with a
// recursive divide-and-conquer and prints one line. Usage: bench-workload [RUNS] (default 300).
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

enum { kItems = 144 };

struct Item {
  char key[24];
  uint32_t hash;
  int32_t value;
};

NOINLINE static uint32_t fnv1a(const char* text) {
  uint32_t hash = 2166136261u;
  for (; *text != '\0'; ++text) hash = (hash ^ (uint8_t)*text) * 16777619u;
  return hash;
}

NOINLINE static int by_hash(const void* left, const void* right) {
  uint32_t a = ((const struct Item*)left)->hash, b = ((const struct Item*)right)->hash;
  return (a > b) - (a < b);
}

NOINLINE static int by_key(const void* left, const void* right) {
  return strcmp(((const struct Item*)left)->key, ((const struct Item*)right)->key);
}

// Recursion: the fold splits the range in halves down to single items (depth ~log2(kItems)), and
// every few levels takes a detour through a deeper chain, so that stacks are not all alike.
NOINLINE static uint64_t chain(uint32_t seed, int depth) {
  if (depth == 0) return seed;
  return chain(seed * 2654435761u + 1, depth - 1) ^ (uint64_t)depth;
}

NOINLINE static uint64_t fold(const struct Item* items, int begin, int end) {
  if (end - begin == 1) return (uint64_t)items[begin].hash * (uint64_t)(items[begin].value | 1);
  int middle = begin + (end - begin) / 2;
  uint64_t left = fold(items, begin, middle), right = fold(items, middle, end);
  if (((left ^ right) & 7) == 0) left ^= chain((uint32_t)right, 8);
  return left * 31 + right;
}

NOINLINE static void fill(struct Item* items, int run) {
  for (int i = 0; i < kItems; ++i) {
    snprintf(items[i].key, sizeof items[i].key, "order-%d-%04d", run % 97, (i * 7919 + run) % 10000);
    items[i].hash = fnv1a(items[i].key);
    items[i].value = (int32_t)(items[i].hash % 1000) - 500;
  }
}

NOINLINE static uint64_t run_once(int run) {
  struct Item items[kItems];
  fill(items, run);
  qsort(items, kItems, sizeof items[0], by_hash);
  uint64_t by_hash_fold = fold(items, 0, kItems);
  qsort(items, kItems, sizeof items[0], by_key);
  return by_hash_fold ^ fold(items, 0, kItems);
}

int main(int argc, char** argv) {
  int runs = argc > 1 ? atoi(argv[1]) : 300;
  if (runs <= 0) {
    fprintf(stderr, "usage: bench-workload [RUNS]  (RUNS: a positive number, default 300)\n");
    return 2;
  }
  uint64_t digest = 0;
  char line[64];
  for (int run = 0; run < runs; ++run) {
    digest = digest * 1099511628211u ^ run_once(run);
    if (run % 50 == 49 || run == runs - 1) {
      snprintf(line, sizeof line, "run %d: %016llx\n", run + 1, (unsigned long long)digest);
      fputs(line, stdout);
    }
  }
  return 0;
}
