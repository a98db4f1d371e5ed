// deep_recursion: a call chain 700 frames deep, past the 500 levels a trace nests before it folds
// (StackTrackerOptions::max_depth), so that a summary, which counts every level, and a trace of
// the same decode need stack trackers of their own (summary_json_beside_test.py).
#define NOINLINE __attribute__((noinline))

NOINLINE int descend(int depth) {
  if (depth == 0) return 0;
  return 1 + descend(depth - 1);
}

int main(void) { return descend(700) == 700 ? 0 : 1; }
