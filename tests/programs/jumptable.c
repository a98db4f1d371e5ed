// jumptable: a dense switch compiled (-O2) to an indirect jmp through a table.
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

NOINLINE int classify(int value) {
  switch (value) {
    case 0: return 11;
    case 1: return 23;
    case 2: return 37;
    case 3: return 41;
    case 4: return 59;
    case 5: return 61;
    case 6: return 79;
    case 7: return 83;
    case 8: return 97;
    case 9: return 101;
    case 10: return 113;
    case 11: return 127;
    default: return -1;
  }
}

// Each case does different work so the switch stays a jump table (not a lookup table).
NOINLINE int dispatch(int value, int acc) {
  switch (value) {
    case 0: acc += 3; break;
    case 1: acc ^= 0x55; break;
    case 2: acc *= 7; break;
    case 3: acc -= classify(value); break;
    case 4: acc <<= 2; break;
    case 5: acc = acc / 3 + 1; break;
    case 6: acc |= 0x100; break;
    case 7: acc &= 0xfff; break;
    case 8: acc += classify(acc & 7); break;
    case 9: acc = ~acc; break;
    case 10: acc >>= 1; break;
    case 11: acc += 1000; break;
    default: acc = 0; break;
  }
  return acc;
}

int main(int argc, char** argv) {
  (void)argv;
  int acc = argc;
  for (int i = 0; i < 12; ++i) acc = dispatch(i, acc);
  printf("jumptable %d\n", acc);
  return 0;
}
