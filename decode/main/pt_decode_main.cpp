// Placeholder until the decoder lands (issue #4).
#include <cstdio>
int main() {
  std::fprintf(stderr, "pt-decode: not implemented yet (issue #4)\n");
  return 2;
}
