// pt-archive embed test input: a fixed call tree. VARIANT changes the code, so a second build
// has another build id (the "rebuilt binary" the embed command must refuse).
#ifndef VARIANT
#define VARIANT 1
#endif

#define NOINLINE __attribute__((noinline))

NOINLINE int embed_leaf(int x) { return x * 3 + VARIANT; }
NOINLINE int embed_middle(int x) { return embed_leaf(x) + embed_leaf(x + 1); }

int main(int argc, char** argv) {
  (void)argv;
  return embed_middle(argc) & 1;
}
