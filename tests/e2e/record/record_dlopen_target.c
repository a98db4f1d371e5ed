/* Loads the library named by argv[1] with dlopen and calls into it: a mapping that exists only
   after the program started, which sideband must report. */
#include <dlfcn.h>
#include <stdio.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: record_dlopen_target LIBRARY\n");
    return 2;
  }
  void* lib = dlopen(argv[1], RTLD_NOW);
  if (lib == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  int (*answer)(void) = (int (*)(void))dlsym(lib, "record_lib_answer");
  if (answer == NULL || answer() != 42) return 1;
  printf("answer %d\n", answer());
  return 0;
}
