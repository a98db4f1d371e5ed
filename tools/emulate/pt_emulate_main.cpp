// Placeholder until the emulator lands (issue #3).
#include <cstdio>
int main() {
  std::fprintf(stderr, "pt-emulate: not implemented yet (issue #3)\n");
  return 2;
}
