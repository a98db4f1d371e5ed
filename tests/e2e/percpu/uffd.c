// percpu-uffd: main touches a page that a userfaultfd handler thread fills only when it gets the
// fault: the main thread blocks in a page fault, not in a syscall. Under pt-emulate --cpus 1 the
// handler can only run if the emulator switches the faulting thread out. Exit 2: no userfaultfd.
// The fault is taken in user mode, so a user-mode-only userfaultfd suffices: since Linux 5.11 it
// needs no privilege even with vm.unprivileged_userfaultfd=0 (older kernels refuse the flag).
#include <errno.h>
#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

static long uffd;
static char* region;
static long page;

static void* handler(void* arg) {
  (void)arg;
  struct uffd_msg msg;
  if (read((int)uffd, &msg, sizeof(msg)) != sizeof(msg)) return NULL;
  static char fill[65536];
  memset(fill, 42, sizeof(fill));
  struct uffdio_copy copy = {.dst = msg.arg.pagefault.address & ~(page - 1),
                             .src = (unsigned long)fill, .len = (unsigned long)page, .mode = 0};
  ioctl((int)uffd, UFFDIO_COPY, &copy);
  return NULL;
}

int main(void) {
  page = sysconf(_SC_PAGESIZE);
#ifdef UFFD_USER_MODE_ONLY
  uffd = syscall(SYS_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
  if (uffd < 0 && errno == EINVAL) uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
#else
  uffd = syscall(SYS_userfaultfd, O_CLOEXEC);
#endif
  if (uffd < 0) { perror("userfaultfd"); return 2; }
  struct uffdio_api api = {.api = UFFD_API};
  if (ioctl((int)uffd, UFFDIO_API, &api) != 0) { perror("UFFDIO_API"); return 2; }
  region = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  struct uffdio_register reg = {.range = {.start = (unsigned long)region, .len = (unsigned long)page},
                                .mode = UFFDIO_REGISTER_MODE_MISSING};
  if (ioctl((int)uffd, UFFDIO_REGISTER, &reg) != 0) { perror("UFFDIO_REGISTER"); return 2; }
  pthread_t t;
  pthread_create(&t, NULL, handler, NULL);
  int value = region[100];  // blocks in the fault until the handler copies the page in
  pthread_join(t, NULL);
  printf("uffd %d\n", value);
  return value == 42 ? 0 : 1;
}
