// Names test input (issue #27). Recorded stripped: `api_work` stays named (exported in .dynsym),
// `outer` and `inner` have no symbol left, only their .eh_frame FDEs. With an argument, `main`
// calls exported_work in names_lib.so (which the gap test then hides), then outer again. VARIANT gives a second
// build another build id (the rebuilt binary --symbols must refuse).
#ifndef VARIANT
#define VARIANT 1
#endif

#define NOINLINE __attribute__((noinline))

int exported_work(const char* text, int n);  // names_lib.so

volatile int sink;

NOINLINE int api_work(int x) {
  int total = 0;
  for (int i = 0; i < 4; ++i) total += x ^ (i * VARIANT);
  return total;
}
NOINLINE static int inner(int x) { return x * 7 + 1; }
NOINLINE static int outer(int rounds) {
  int total = 0;
  for (int i = 0; i < rounds; ++i) total += inner(i) + api_work(i);
  return total;
}

int main(int argc, char** argv) {
  sink = outer(400);
  if (argc > 1) sink += exported_work(argv[1], 50);
  sink += outer(20);  // the trace ends in code that is found, after any gap
  return 0;
}
