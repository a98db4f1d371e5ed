// The model's kernel-side state, shared by kernel_model.cpp and kernel_model_world.cpp.
#pragma once

#include <memory>

#include "kernel_model.h"

namespace ptscope::record::testing {

// struct perf_buffer (kernel/events/internal.h): the data ring and the AUX area of one mmap.
struct KernelModel::Rb {
  void* base = nullptr;  // user page + data pages, page aligned
  size_t base_len = 0;
  perf_event_mmap_page* page = nullptr;
  uint8_t* data = nullptr;
  uint64_t data_pages = 0;
  uint64_t data_size = 0;
  bool overwrite = false;     // rb->overwrite: mapped without PROT_WRITE
  uint64_t head = 0;          // rb->head
  uint64_t lost = 0;          // rb->lost: records dropped since the last one written
  uint64_t mmap_locked = 0;   // rb->mmap_locked: pages charged to pinned_vm
  int mmap_count = 0;
  uint8_t* aux = nullptr;
  uint64_t aux_pages = 0;
  uint64_t aux_size = 0;
  uint64_t aux_offset = 0;    // rb->aux_pgoff << PAGE_SHIFT
  bool aux_overwrite = false; // AUX mapped without PROT_WRITE: snapshot mode
  uint64_t aux_watermark = 0;
  uint64_t aux_head = 0;      // rb->aux_head
  uint64_t aux_wakeup = 0;    // rb->aux_wakeup
  uint64_t aux_mmap_locked = 0;
};

// struct perf_event, with what the intel_pt driver keeps for it (struct pt_buffer, the
// perf_output_handle of the AUX transaction in progress).
struct KernelModel::Ev {
  ModelEvent pub;
  std::shared_ptr<Rb> rb;     // event->rb (its own, or SET_OUTPUT's)
  bool hw_active = false;     // pt_event_start() succeeded: hw.state == 0
  int hw_cpu = -1, hw_pid = 0, hw_tid = 0;
  uint64_t handle_head = 0;   // handle->head: where this transaction started (full mode)
  uint64_t handle_size = 0;   // handle->size: room in the AUX area (full mode)
  uint64_t written = 0;       // buf->data_size: bytes written in this transaction
  uint64_t snap_offset = 0;   // the hardware's write offset in the buffer (snapshot mode)
  uint64_t aux_flags = 0;     // handle->aux_flags
};

}  // namespace ptscope::record::testing
