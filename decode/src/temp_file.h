// Private scratch files of a decode: data that waits past a memory budget (held-back slice
// records, a per-CPU instruction listing's runs) goes to a file no other process can open and
// nothing leaves behind, even after a crash.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace ptscope::decode {

// A new file in $TMPDIR (or /tmp; `*dir` says which), 0600, unnamed from the start where the file
// system can (O_TMPFILE), else named and unlinked at once. -1 when it cannot be created.
int OpenScratchFile(std::string* dir);
// pwrite / pread of all `size` bytes at `offset`, retried on EINTR and partial transfers. False on
// failure (errno says why; EIO when the file ends before `size` bytes were read).
bool WriteAllAt(int fd, const uint8_t* data, size_t size, off_t offset);
bool ReadAllAt(int fd, uint8_t* data, size_t size, off_t offset);

}  // namespace ptscope::decode
