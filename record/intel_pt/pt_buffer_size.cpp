#include <charconv>

#include "perf_event.h"
#include "kernel_source.h"

namespace ptscope::record {

uint64_t DefaultAuxBytes(const HostFacts& facts) {
  bool unlimited = facts.privileges.root() || facts.privileges.cap_ipc_lock();
  return unlimited ? (4u << 20) : (256u << 10);
}

Result<uint64_t> ParseBufferSize(const std::string& text) {
  uint64_t value = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  std::string suffix(ptr, text.data() + text.size());
  uint64_t scale = suffix.empty() ? 1
                   : (suffix == "K" || suffix == "k" || suffix == "KiB") ? 1024
                   : (suffix == "M" || suffix == "m" || suffix == "MiB") ? 1024 * 1024
                   : (suffix == "G" || suffix == "g" || suffix == "GiB") ? 1024ull * 1024 * 1024
                                                                          : 0;
  if (ec != std::errc() || scale == 0 || value == 0 || value > (1ull << 34) / scale)
    return MakeError(Errc::kInvalidArgument, "--snapshot-size '" + text +
                                                 "' is not a size like 256K, 4M or 1G");
  uint64_t bytes = value * scale;
  // rb_alloc_aux() (kernel/events/ring_buffer.c) keeps the AUX pages in one array that must fit
  // in an allocation of order MAX_PAGE_ORDER: 2 GiB of 4 KiB pages at most; larger always fails.
  if (bytes > (2ull << 30))
    return MakeError(Errc::kInvalidArgument, "--snapshot-size '" + text +
                                                 "' is above 2G, the largest AUX area the kernel "
                                                 "allocates per event");
  uint64_t rounded = PageSize();
  while (rounded < bytes) rounded <<= 1;
  return rounded;
}

}  // namespace ptscope::record
