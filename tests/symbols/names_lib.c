// Function-bounds test input: a shared library with PLT calls to libc (JUMP_SLOT), a local IFUNC
// called through its own PLT stub (IRELATIVE, as libc calls strlen), an exported function and a
// static one (no symbol once stripped: named by its .eh_frame FDE).
#include <stdio.h>
#include <string.h>

static int add_one(int x) { return x + 1; }
static int (*resolve_bump(void))(int) { return add_one; }
__attribute__((visibility("hidden"))) int bump(int x) __attribute__((ifunc("resolve_bump")));

__attribute__((noinline)) static int hidden_work(const char* text, int n) {
  int total = 0;
  for (int i = 0; i < n; ++i) total += (int)strlen(text) + bump(i);
  return total;
}

int exported_work(const char* text, int n) { return hidden_work(text, n) + puts(text); }
