// A tiny static program (no libc) whose exact instruction sequence is known by construction:
// every instruction has its own label, so the expected trace (known_loop.expected) is a list of
// labels that the tests turn into addresses with `nm`. Flow: call func three times in a loop,
// then exit(0) by syscall. Branch outcomes: ret T, jnz T, ret T, jnz T, ret T, jnz N.
asm(R"(
  .text
  .globl _start
_start:
i00: mov $3, %ecx
i01: call func
i02: dec %ecx
i03: jnz i01
i04: mov $60, %eax
i05: xor %edi, %edi
i06: syscall
func:
f00: nop
f01: ret
)");
