// exceptions: a C++ exception thrown three frames deep and caught in main.
#include <cstdio>
#include <stdexcept>

#define NOINLINE __attribute__((noinline))

NOINLINE void thrower(int x) {
  if (x > 0) throw std::runtime_error("boom");
}
NOINLINE void middle(int x) { thrower(x + 1); }
NOINLINE void outer(int x) { middle(x + 1); }
NOINLINE int handled(int x) { return x + 100; }

int main() {
  int result = 0;
  try {
    outer(1);
  } catch (const std::runtime_error& error) {
    result = handled(1);
  }
  std::printf("exceptions %d\n", result);
  return 0;
}
