// Placeholder until the archive tool lands (issue #2).
#include <cstdio>
int main() {
  std::fprintf(stderr, "pt-archive: not implemented yet (issue #2)\n");
  return 2;
}
