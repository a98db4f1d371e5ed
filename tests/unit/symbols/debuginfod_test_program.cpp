// Test binary for the debuginfod and MiniDebugInfo tests: two named functions, one in a
// namespace (demangling), built with a build id.
namespace mini {
__attribute__((noinline)) int Twice(int x) { return 2 * x + (x >> 3); }
}  // namespace mini
extern "C" __attribute__((noinline)) int PlainC(int x) { return mini::Twice(x) ^ 0x5a; }
int main(int argc, char**) { return PlainC(argc) == 0x7f ? 1 : 0; }
