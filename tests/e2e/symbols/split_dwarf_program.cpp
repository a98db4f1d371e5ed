// Split DWARF test input (split_dwarf_test.py compiles it with -gsplit-dwarf): a demangled C++
// method and an always_inline helper whose inlined frame lives only in the .dwo/.dwp. One line
// per function, so each slice's source line is the line of its marker comment.
namespace demo {
struct Widget {
  int Frobnicate(int x);
};
__attribute__((noinline)) int Widget::Frobnicate(int x) { return x * 3 + 1; }  // FROBNICATE
}  // namespace demo

static inline __attribute__((always_inline)) int InlinedHelper(int x) { return x * x + 7; }  // HELPER

extern "C" __attribute__((noinline)) int OuterFunction(int x) { return InlinedHelper(x) ^ 0x55; }  // OUTER

int main(int argc, char**) { demo::Widget widget; return OuterFunction(argc) + widget.Frobnicate(argc); }  // MAIN
