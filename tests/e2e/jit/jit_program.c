// A tiny "JIT": writes three x86-64 functions into an anonymous region (RW, then RX) and
// describes them like runtimes do: /tmp/perf-PID.map (all three) and ./jit-PID.dump (jit_add
// and jit_mul with their code bytes; jit_mapped_only is deliberately left out so that only its
// name is known). Then it calls them:
//   main -> jit_add -> jit_mul -> native_twice     (JIT->JIT, JIT->native via an absolute address)
//   main -> jit_mapped_only                        (no code bytes anywhere after the run)
// jit_add(3, 4) = jit_mul(3, 4) + 3 = native_twice(12) + 3 = 27; jit_mapped_only(27) = 28.
// `jit_program torn`: the jitdump ends 24 bytes into jit_mapped_only's CODE_LOAD record (77
// bytes), as V8's does when the capture stops while its buffer holds the rest.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

__attribute__((noinline)) long native_twice(long x) {
  __asm__ volatile("");
  return 2 * x;
}

enum { kAddOffset = 0x00, kMulOffset = 0x40, kMappedOnlyOffset = 0x80 };

static const uint8_t kJitAdd[] = {
    0x53,                          // push rbx
    0x48, 0x89, 0xfb,              // mov rbx, rdi
    0xe8, 0x37, 0x00, 0x00, 0x00,  // call jit_mul (0x40 - 0x09)
    0x48, 0x01, 0xd8,              // add rax, rbx
    0x5b,                          // pop rbx
    0xc3,                          // ret
};
static uint8_t jit_mul_code[] = {
    0x48, 0x89, 0xf8,                                            // mov rax, rdi
    0x48, 0x0f, 0xaf, 0xc6,                                      // imul rax, rsi
    0x48, 0x89, 0xc7,                                            // mov rdi, rax
    0x49, 0xbb, 0, 0, 0, 0, 0, 0, 0, 0,                          // movabs r11, native_twice
    0x48, 0x83, 0xec, 0x08,                                      // sub rsp, 8 (alignment)
    0x41, 0xff, 0xd3,                                            // call r11
    0x48, 0x83, 0xc4, 0x08,                                      // add rsp, 8
    0xc3,                                                        // ret
};
static const uint8_t kJitMappedOnly[] = {0x48, 0x8d, 0x47, 0x01, 0xc3};  // lea rax,[rdi+1]; ret

static uint64_t MonotonicNs(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void Put(FILE* f, uint64_t value, int width) { fwrite(&value, (size_t)width, 1, f); }

static void Prefix(FILE* f, uint32_t id, uint32_t total_size) {
  Put(f, id, 4);
  Put(f, total_size, 4);
  Put(f, MonotonicNs(), 8);
}

static void CodeLoad(FILE* f, uint64_t addr, const char* name, const uint8_t* code, size_t size,
                     uint64_t index) {
  Prefix(f, 0, (uint32_t)(56 + strlen(name) + 1 + size));
  Put(f, (uint64_t)getpid(), 4);
  Put(f, (uint64_t)getpid(), 4);
  Put(f, addr, 8);
  Put(f, addr, 8);
  Put(f, size, 8);
  Put(f, index, 8);
  fwrite(name, strlen(name) + 1, 1, f);
  fwrite(code, size, 1, f);
}

static int WriteJitdump(uint8_t* region, int torn) {
  char path[64];
  snprintf(path, sizeof path, "jit-%d.dump", (int)getpid());
  FILE* f = fopen(path, "w+");
  if (f == NULL) return -1;
  Put(f, 0x4A695444, 4);  // magic
  Put(f, 1, 4);           // version
  Put(f, 40, 4);          // header size
  Put(f, 62, 4);          // EM_X86_64
  Put(f, 0, 4);
  Put(f, (uint64_t)getpid(), 4);
  Put(f, MonotonicNs(), 8);
  Put(f, 0, 8);  // flags: CLOCK_MONOTONIC timestamps
  fflush(f);
  // The marker: one executable page of the dump mapped, so the recorder learns of the file.
  void* marker = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fileno(f), 0);
  if (marker == MAP_FAILED) return -1;
  // DEBUG_INFO for jit_add (precedes its LOAD): one entry, jit_program.js:42.
  Prefix(f, 2, 16 + 16 + 16 + (uint32_t)sizeof "jit_program.js");
  Put(f, (uint64_t)(uintptr_t)(region + kAddOffset), 8);
  Put(f, 1, 8);
  Put(f, (uint64_t)(uintptr_t)(region + kAddOffset), 8);
  Put(f, 42, 4);
  Put(f, 0, 4);
  fwrite("jit_program.js", sizeof "jit_program.js", 1, f);
  CodeLoad(f, (uint64_t)(uintptr_t)(region + kAddOffset), "jit_add", kJitAdd, sizeof kJitAdd, 1);
  CodeLoad(f, (uint64_t)(uintptr_t)(region + kMulOffset), "jit_mul", jit_mul_code,
           sizeof jit_mul_code, 2);
  if (torn) {  // the prefix and the pid/tid of a record of 56 + 16 + 5 bytes, nothing more
    Prefix(f, 0, (uint32_t)(56 + sizeof "jit_mapped_only" + sizeof kJitMappedOnly));
    Put(f, (uint64_t)getpid(), 4);
    Put(f, (uint64_t)getpid(), 4);
  }
  return fclose(f);
}

static int WritePerfMap(uint8_t* region) {
  char path[64];
  snprintf(path, sizeof path, "/tmp/perf-%d.map", (int)getpid());
  FILE* f = fopen(path, "w");
  if (f == NULL) return -1;
  fprintf(f, "%lx %zx jit_add\n", (unsigned long)(uintptr_t)(region + kAddOffset), sizeof kJitAdd);
  fprintf(f, "%lx %zx jit_mul\n", (unsigned long)(uintptr_t)(region + kMulOffset),
          sizeof jit_mul_code);
  fprintf(f, "%lx %zx jit_mapped_only\n", (unsigned long)(uintptr_t)(region + kMappedOnlyOffset),
          sizeof kJitMappedOnly);
  return fclose(f);
}

int main(int argc, char** argv) {
  const int torn = argc > 1 && strcmp(argv[1], "torn") == 0;
  uint8_t* region = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (region == MAP_FAILED) return 2;
  uint64_t native = (uint64_t)(uintptr_t)&native_twice;
  memcpy(jit_mul_code + 12, &native, 8);
  memcpy(region + kAddOffset, kJitAdd, sizeof kJitAdd);
  memcpy(region + kMulOffset, jit_mul_code, sizeof jit_mul_code);
  memcpy(region + kMappedOnlyOffset, kJitMappedOnly, sizeof kJitMappedOnly);
  if (mprotect(region, 4096, PROT_READ | PROT_EXEC) != 0) return 3;
  if (WriteJitdump(region, torn) != 0 || WritePerfMap(region) != 0) return 4;
  long (*jit_add)(long, long) = (long (*)(long, long))(uintptr_t)(region + kAddOffset);
  long (*jit_mapped_only)(long) = (long (*)(long))(uintptr_t)(region + kMappedOnlyOffset);
  long sum = jit_add(3, 4);
  long last = jit_mapped_only(sum);
  return sum == 27 && last == 28 ? 0 : 1;
}
