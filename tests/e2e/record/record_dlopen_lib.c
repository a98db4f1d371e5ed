/* A library that record_dlopen_target loads at run time: its MMAP2 (with build id) must appear
   in a pt-record --sideband-only capture. */
int record_lib_answer(void) { return 42; }
