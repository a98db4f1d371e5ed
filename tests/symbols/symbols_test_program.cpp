// Symbolizer test input: a C++ method (demangled name), an always_inline helper inlined into
// OuterFunction at -O2. VARIANT changes the code so that a second build has another build id.
#ifndef VARIANT
#define VARIANT 1
#endif

namespace demo {
struct Widget {
  int Frobnicate(int x);
};
__attribute__((noinline)) int Widget::Frobnicate(int x) { return x * 3 + VARIANT; }
}  // namespace demo

static inline __attribute__((always_inline)) int InlinedHelper(int x) { return x * x + 7; }

extern "C" __attribute__((noinline)) int OuterFunction(int x) { return InlinedHelper(x) ^ 0x55; }

int main(int argc, char**) {
  demo::Widget widget;
  return OuterFunction(argc) + widget.Frobnicate(argc);
}
