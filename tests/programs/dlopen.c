// dlopen: loads the plugin module whose absolute path is argv[1] and calls plugin_entry.
#include <dlfcn.h>
#include <stdio.h>

#define NOINLINE __attribute__((noinline))

typedef int (*EntryFn)(int);

NOINLINE int call_plugin(EntryFn entry) { return entry(4); }

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: dlopen /abs/path/libplugin.so\n");
    return 2;
  }
  void* handle = dlopen(argv[1], RTLD_NOW);
  if (handle == NULL) {
    fprintf(stderr, "dlopen: %s\n", dlerror());
    return 1;
  }
  EntryFn entry = (EntryFn)dlsym(handle, "plugin_entry");
  if (entry == NULL) return 1;
  printf("dlopen %d\n", call_plugin(entry));
  return 0;
}
