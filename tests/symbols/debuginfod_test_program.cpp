// Test binary for the debuginfod and MiniDebugInfo tests: two named functions, one in a
// namespace (demangling), built with a build id. VARIANT gives other builds other build ids
// (the batch test decodes several different programs at once).
#ifndef VARIANT
#define VARIANT 0
#endif
namespace mini {
__attribute__((noinline)) int Twice(int x) { return 2 * x + (x >> 3) + VARIANT; }
}  // namespace mini
extern "C" __attribute__((noinline)) int PlainC(int x) { return mini::Twice(x) ^ 0x5a; }
int main(int argc, char**) { return PlainC(argc) == 0x7f ? 1 : 0; }
