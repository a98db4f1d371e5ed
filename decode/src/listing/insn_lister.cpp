// Instruction listing with pt_insn (see insn_lister.h).
#include "listing/insn_lister.h"

#include <cstring>

namespace ptscope::decode {

void InsnWriter::Write(uint32_t tid, uint64_t address) {
  if (used_ + 48 > sizeof buffer_) Flush();
  char digits[20];
  int n = 0;
  do {
    digits[n++] = static_cast<char>('0' + tid % 10);
    tid /= 10;
  } while (tid != 0);
  while (n > 0) buffer_[used_++] = digits[--n];
  buffer_[used_++] = ' ';
  buffer_[used_++] = '0';
  buffer_[used_++] = 'x';
  static constexpr char kHex[] = "0123456789abcdef";
  n = 0;
  do {
    digits[n++] = kHex[address & 0xf];
    address >>= 4;
  } while (address != 0);
  while (n > 0) buffer_[used_++] = digits[--n];
  buffer_[used_++] = '\n';
}

void InsnWriter::Flush() {
  if (used_ != 0 && std::fwrite(buffer_, 1, used_, out_) != used_) failed_ = true;
  used_ = 0;
}

void InsnLister::UpdateImage(pt_insn_decoder* decoder, uint64_t tsc, bool have_time) {
  uint64_t time_ns = have_time ? setup_.time.ToNs(tsc) : UINT64_MAX - 1;
  if (!image_.NeedsSwitch(time_ns)) return;
  bool changed = false;
  pt_image* image = image_.At(time_ns, &changed);
  if (changed) pt_insn_set_image(decoder, image);
}

void InsnLister::FollowSchedule(uint64_t tsc, bool have_time) {
  if (timeline_ == nullptr) return;
  uint64_t time_ns = have_time ? setup_.time.ToNs(tsc) : UINT64_MAX;
  uint64_t since_ns = 0;
  ThreadKey thread = timeline_->ThreadOnCpu(cpu_, time_ns, &since_ns);
  // A new run also when the same thread was switched in again: it may have run elsewhere since.
  if (have_thread_ && thread == thread_ && since_ns == thread_since_ns_) return;
  have_thread_ = true;
  thread_ = thread;
  thread_since_ns_ = since_ns;
  image_.SetPid(thread.pid);
  tid_ = thread.tid;
  if (switch_run_) writer_now_ = switch_run_(thread, time_ns);
}

void InsnLister::NoteError(int error, pt_insn_decoder* decoder) {
  if (error == -pte_eos) return;
  ++errors_;
  if (first_error_.empty()) {
    uint64_t offset = 0;
    pt_insn_get_offset(decoder, &offset);
    first_error_ = std::string(pt_errstr(pt_errcode(error))) + " at trace offset " +
                   std::to_string(offset);
  }
}

void InsnLister::DecodeSegment(const uint8_t* begin, size_t size) {
  if (size == 0) return;
  pt_config config;
  pt_config_init(&config);
  setup_.Apply(config);
  config.begin = const_cast<uint8_t*>(begin);
  config.end = const_cast<uint8_t*>(begin) + size;
  pt_insn_decoder* decoder = pt_insn_alloc_decoder(&config);
  if (decoder == nullptr) return;
  int status = pt_insn_sync_forward(decoder);
  uint64_t stuck_offset = UINT64_MAX, stuck_insns = 0;
  while (status >= 0) {
    uint64_t tsc = 0;
    uint32_t lost_mtc = 0, lost_cyc = 0;
    bool have_time = pt_insn_time(decoder, &tsc, &lost_mtc, &lost_cyc) >= 0 && tsc != 0;
    FollowSchedule(tsc, have_time);
    UpdateImage(decoder, tsc, have_time);
    for (;;) {
      while (status >= 0 && (status & pts_event_pending) != 0) {
        pt_event event;
        status = pt_insn_event(decoder, &event, sizeof event);
        if (status < 0) break;
        if (event.type == ptev_enabled) {
          if (event.has_tsc == 0) pt_insn_time(decoder, &event.tsc, &lost_mtc, &lost_cyc);
          FollowSchedule(event.tsc, event.tsc != 0);
          UpdateImage(decoder, event.tsc, event.tsc != 0);
        } else if (event.has_tsc) {
          UpdateImage(decoder, event.tsc, true);
        }
      }
      if (status < 0 || (status & pts_eos) != 0) break;
      pt_insn insn;
      std::memset(&insn, 0, sizeof insn);
      status = pt_insn_next(decoder, &insn, sizeof insn);
      // An instruction and an error can come together: the instruction is valid unless ptic_error.
      if (insn.iclass != ptic_error) {
        if (writer_now_ != nullptr) writer_now_->Write(tid_, insn.ip);
        ++instructions_;
      }
      // Bound a walk through a packet-free loop of direct jumps (damaged trace): see FlowDecoder.
      uint64_t offset = 0;
      pt_insn_get_offset(decoder, &offset);
      if (offset != stuck_offset) {
        stuck_offset = offset;
        stuck_insns = 0;
      } else if (status >= 0 && ++stuck_insns >= (uint64_t{1} << 20)) {
        status = -pte_internal;
      }
    }
    if (status >= 0 || status == -pte_eos) break;
    NoteError(status, decoder);
    uint64_t last_sync = 0, current = 0;
    if (pt_insn_get_sync_offset(decoder, &last_sync) < 0) last_sync = UINT64_MAX;
    if (pt_insn_get_offset(decoder, &current) < 0) current = 0;
    int64_t next = ResyncOffset(begin, size, current, last_sync);
    status = next < 0 ? -pte_eos : pt_insn_sync_set(decoder, static_cast<uint64_t>(next));
  }
  pt_insn_free_decoder(decoder);
}

}  // namespace ptscope::decode
