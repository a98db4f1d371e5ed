// plugin: the shared module dlopen.c loads; plugin_entry calls plugin_helper.
#define NOINLINE __attribute__((noinline))

// static: a direct call, not through the PLT (an exported helper would be interposable).
static NOINLINE int plugin_helper(int x) { return x * 5; }

__attribute__((visibility("default"))) int plugin_entry(int x) { return plugin_helper(x) + 1; }
