// The model's world: tasks scheduled on CPUs, the PT hardware writing the AUX area, and the
// records the kernel writes into the data rings. Each rule names the kernel function it comes
// from (kernel/events/core.c, kernel/events/ring_buffer.c, arch/x86/events/intel/pt.c).
#include <algorithm>
#include <cstring>

#include "kernel_model_internal.h"
#include "sideband_layout.h"

namespace ptscope::record::testing {
namespace {

// CIRC_SPACE(head, tail, size) of include/linux/circ_buf.h: one byte always stays free.
uint64_t CircSpace(uint64_t head, uint64_t tail, uint64_t size) {
  return (tail - (head + 1)) & (size - 1);
}

bool WantsMmap(const perf_event_attr& a) { return a.mmap || a.mmap2; }
bool WantsComm(const perf_event_attr& a) { return a.comm; }
bool WantsTask(const perf_event_attr& a) { return a.task; }

}  // namespace

bool KernelModel::Follows(const Ev& ev, int tid, int cpu) const {
  // event_filter_match(): the event's CPU, if it has one, must be the current CPU.
  if (ev.pub.cpu != -1 && ev.pub.cpu != cpu) return false;
  if (ev.pub.pid == -1) return true;  // a CPU-wide event sees every task on its CPU
  // A task's events, and with attr.inherit those of the task it was forked from
  // (inherit_event(): children write into the parent's buffer, with its id).
  for (int t = tid;;) {
    if (ev.pub.pid == t) return true;
    auto parent = parent_of_.find(t);
    if (parent == parent_of_.end() || !ev.pub.attr.inherit) return false;
    t = parent->second;
  }
}

void KernelModel::Output(Ev& ev, perf::Record record, int cpu, int pid, int tid) {
  // perf_output_begin(): into event->rb; nothing when the event has no buffer.
  Rb* rb = ev.rb.get();
  if (rb == nullptr || rb->base == nullptr) return;
  perf::RecordLayout layout{ev.pub.attr.sample_type, ev.pub.attr.sample_id_all != 0};
  perf::SampleId id;  // perf_event_header__init_id()
  id.pid = static_cast<uint32_t>(pid);
  id.tid = static_cast<uint32_t>(tid);
  id.time = clock_++;
  id.id = ev.pub.id;
  id.cpu = static_cast<uint32_t>(cpu);
  record.sample_id = id;
  std::vector<uint8_t> bytes = perf::BuildRecord(record, layout);
  // __perf_output_begin(): a buffer that dropped records first gets a PERF_RECORD_LOST saying
  // how many (have_lost).
  if (rb->lost != 0) {
    perf::Record lost;
    lost.type = perf::kRecordLost;
    lost.body = perf::LostRecord{ev.pub.id, rb->lost};
    lost.sample_id = id;
    std::vector<uint8_t> lost_bytes = perf::BuildRecord(lost, layout);
    bytes.insert(bytes.begin(), lost_bytes.begin(), lost_bytes.end());
  }
  // __perf_output_begin(): without overwrite, a record that does not fit is dropped and counted
  // (the fail path: local_inc(&rb->lost)).
  const uint64_t tail = rb->page->data_tail;
  if (!rb->overwrite && CircSpace(rb->head, tail, rb->data_size) < bytes.size()) {
    ++rb->lost;
    return;
  }
  if (rb->lost != 0) rb->lost = 0;  // local_xchg(&rb->lost, 0)
  for (size_t i = 0; i < bytes.size(); ++i) {
    rb->data[(rb->head + i) & (rb->data_size - 1)] = bytes[i];
  }
  rb->head += bytes.size();
  rb->page->data_head = rb->head;  // perf_output_put_handle()
}

void KernelModel::SideBand(int pid, int tid, const perf::Record& record,
                           bool (*wants)(const perf_event_attr&)) {
  // perf_iterate_sb(): the task's events and every CPU-wide side-band event of the current CPU.
  int cpu = 0;
  for (const auto& [c, t] : running_) {
    if (t == tid) cpu = c;
  }
  for (auto& [fd, ev] : events_) {
    if (!ev->pub.enabled || ev->pub.exited || !wants(ev->pub.attr)) continue;
    if (!Follows(*ev, tid, cpu)) continue;
    Output(*ev, record, cpu, pid, tid);
  }
}

void KernelModel::StartPt(Ev& ev, int cpu, int pid, int tid) {
  // pt_event_start() -> perf_aux_output_begin(): needs an AUX area.
  Rb* rb = ev.rb.get();
  ev.hw_active = false;
  if (rb == nullptr || rb->aux == nullptr) return;
  ev.hw_cpu = cpu;
  ev.hw_pid = pid;
  ev.hw_tid = tid;
  ev.handle_head = rb->aux_head;
  ev.written = 0;
  ev.aux_flags = 0;
  if (rb->aux_overwrite) {
    // pt_buffer_reset_offsets(): in snapshot mode aux_head is an offset within the buffer.
    ev.snap_offset = rb->aux_head & (rb->aux_size - 1);
  } else {
    // Full mode: the room up to aux_tail; none left disables the event
    // (perf_event_disable_inatomic) instead of overwriting unread data.
    const uint64_t tail = rb->page->aux_tail;
    ev.handle_size = rb->aux_head - tail < rb->aux_size
                         ? CircSpace(rb->aux_head, tail, rb->aux_size)
                         : 0;
    if (ev.handle_size == 0) {
      ev.pub.enabled = false;
      return;
    }
  }
  ev.hw_active = true;
  ev.pub.itrace_started = true;  // pt_config(): perf_event_itrace_started()
}

void KernelModel::CommitAux(Ev& ev, bool stopping) {
  // perf_aux_output_end(), called by pt_event_stop() and by the PMI (intel_pt_interrupt).
  Rb* rb = ev.rb.get();
  if (rb == nullptr || rb->aux == nullptr) return;
  uint64_t offset = 0, size = 0;
  if (rb->aux_overwrite) {
    if (!stopping) return;  // snapshot mode has no PMI
    // pt_event_stop(): handle.head = the write offset; the size is the whole buffer.
    ev.aux_flags |= perf::kAuxFlagOverwrite;
    rb->aux_head = ev.snap_offset;
    offset = rb->aux_head;
    size = rb->aux_size;
  } else {
    ev.aux_flags &= ~perf::kAuxFlagOverwrite;
    offset = rb->aux_head;
    size = ev.written;
    rb->aux_head += ev.written;
  }
  // perf_aux_output_end(): "Only send RECORD_AUX if we have something useful to communicate."
  if (size != 0 || (ev.aux_flags & ~perf::kAuxFlagOverwrite) != 0) {
    perf::Record aux;
    aux.type = perf::kRecordAux;
    aux.body = perf::AuxRecord{offset, size, ev.aux_flags};
    Output(ev, aux, ev.hw_cpu, ev.hw_pid, ev.hw_tid);
  }
  rb->page->aux_head = rb->aux_head;
  // rb_need_aux_wakeup()
  if (!rb->aux_overwrite && rb->aux_head - rb->aux_wakeup >= rb->aux_watermark) {
    rb->aux_wakeup = rb->aux_head / rb->aux_watermark * rb->aux_watermark;
  }
  // perf_aux_output_end(): a truncated transaction disables the event
  // (perf_event_disable_inatomic); the reader must re-enable it.
  if (ev.aux_flags & perf::kAuxFlagTruncated) {
    ev.pub.enabled = false;
    ev.hw_active = false;
  }
  ev.written = 0;
  ev.aux_flags = 0;
  ev.handle_head = rb->aux_head;
}

void KernelModel::StopPtOf(Ev& ev) {
  // pt_event_stop(PERF_EF_UPDATE) at sched-out, disable or close.
  if (!ev.hw_active) return;
  ev.hw_active = false;
  CommitAux(ev, true);
}

void KernelModel::SchedInEvent(Ev& ev, int cpu, int pid, int tid) {
  if (!ev.pub.pt || !ev.pub.enabled || ev.pub.exited) return;
  // event_sched_in() -> perf_log_itrace_start(): until the PMU has started tracing once.
  if (!ev.pub.itrace_started) {
    perf::Record start;
    start.type = perf::kRecordItraceStart;
    start.body = perf::ItraceStartRecord{static_cast<uint32_t>(pid), static_cast<uint32_t>(tid)};
    Output(ev, start, cpu, pid, tid);
  }
  StartPt(ev, cpu, pid, tid);
}

void KernelModel::Enable(Ev& ev) {
  // _perf_event_enable(): an OFF event becomes INACTIVE and is scheduled in if its task runs.
  if (ev.pub.enabled) return;
  ev.pub.enabled = true;
  for (const auto& [cpu, tid] : running_) {
    if (Follows(ev, tid, cpu)) {
      SchedInEvent(ev, cpu, task_pid_[tid], tid);
      break;
    }
  }
}

void KernelModel::Disable(Ev& ev) {
  // _perf_event_disable(): event_sched_out() -> pt_event_del() -> pt_event_stop(UPDATE).
  if (!ev.pub.enabled) return;
  StopPtOf(ev);
  ev.pub.enabled = false;
}

void KernelModel::SchedIn(int pid, int tid, int cpu) {
  task_pid_[tid] = pid;
  running_[cpu] = tid;
  // __perf_event_task_sched_in(): the context's events first, then the switch records.
  for (auto& [fd, ev] : events_) {
    if (Follows(*ev, tid, cpu)) SchedInEvent(*ev, cpu, pid, tid);
  }
  const int prev = last_out_.count(cpu) ? last_out_[cpu] : 0;
  for (auto& [fd, ev] : events_) {  // perf_event_switch(): SWITCH, or SWITCH_CPU_WIDE with prev
    if (!ev->pub.enabled || ev->pub.exited || !ev->pub.attr.context_switch) continue;
    if (!Follows(*ev, tid, cpu)) continue;
    perf::Record in;
    const bool wide = ev->pub.pid == -1;
    in.type = wide ? perf::kRecordSwitchCpuWide : perf::kRecordSwitch;
    in.body = perf::SwitchRecord{false, false, wide,
                                 static_cast<uint32_t>(prev ? task_pid_[prev] : 0),
                                 static_cast<uint32_t>(prev)};
    Output(*ev, in, cpu, pid, tid);
  }
}

void KernelModel::SchedOut(int tid, bool preempt) {
  int cpu = -1;
  for (const auto& [c, t] : running_) {
    if (t == tid) cpu = c;
  }
  if (cpu < 0) return;
  const int pid = task_pid_[tid];
  // __perf_event_task_sched_out(): the switch records first, then the events stop.
  for (auto& [fd, ev] : events_) {
    if (!ev->pub.enabled || ev->pub.exited || !ev->pub.attr.context_switch) continue;
    if (!Follows(*ev, tid, cpu)) continue;
    perf::Record out;
    const bool wide = ev->pub.pid == -1;
    out.type = wide ? perf::kRecordSwitchCpuWide : perf::kRecordSwitch;
    out.misc = perf::kMiscSwitchOut;
    out.body = perf::SwitchRecord{true, preempt, wide, 0, 0};
    Output(*ev, out, cpu, pid, tid);
  }
  for (auto& [fd, ev] : events_) {
    if (ev->hw_active && ev->hw_cpu == cpu) StopPtOf(*ev);
  }
  running_.erase(cpu);
  last_out_[cpu] = tid;
}

void KernelModel::WritePt(int tid, std::span<const uint8_t> bytes) {
  int cpu = -1;
  for (const auto& [c, t] : running_) {
    if (t == tid) cpu = c;
  }
  for (auto& [fd, ev] : events_) {
    if (!ev->hw_active || ev->hw_cpu != cpu) continue;
    Rb* rb = ev->rb.get();
    if (rb->aux_overwrite) {
      // Snapshot mode: the hardware goes round the buffer forever (a single ToPA ring).
      for (uint8_t b : bytes) {
        rb->aux[ev->snap_offset] = b;
        ev->snap_offset = (ev->snap_offset + 1) & (rb->aux_size - 1);
      }
      continue;
    }
    size_t done = 0;
    while (done < bytes.size() && ev->hw_active) {
      // Full mode: up to the STOP mark at aux_tail (pt_buffer_reset_markers()); an INT mark at
      // the watermark raises the PMI, which commits what was written and starts a new
      // transaction (intel_pt_interrupt()).
      const uint64_t room = ev->handle_size - ev->written;
      const uint64_t to_watermark =
          rb->aux_wakeup + rb->aux_watermark - (ev->handle_head + ev->written);
      const uint64_t n = std::min<uint64_t>({bytes.size() - done, room, to_watermark});
      for (uint64_t i = 0; i < n; ++i) {
        rb->aux[(ev->handle_head + ev->written + i) & (rb->aux_size - 1)] = bytes[done + i];
      }
      ev->written += n;
      done += n;
      if (ev->written == ev->handle_size && done < bytes.size()) {
        // The buffer is full: the hardware stops (RTIT_STATUS.Stopped) and pt_handle_status()
        // flags the transaction TRUNCATED; the rest of the trace is lost.
        ev->aux_flags |= perf::kAuxFlagTruncated;
        ev->hw_active = false;
        CommitAux(*ev, false);
        break;
      }
      if (n == to_watermark) {
        CommitAux(*ev, false);
        StartPt(*ev, cpu, ev->hw_pid, ev->hw_tid);
      }
    }
  }
}

void KernelModel::FlagAux(int tid, uint64_t flags) {
  for (auto& [fd, ev] : events_) {
    if (ev->hw_active && ev->hw_tid == tid) ev->aux_flags |= flags;  // perf_aux_output_flag()
  }
}

void KernelModel::Mmap2(int pid, int tid, const perf::MmapRecord& mmap) {
  // perf_event_mmap_output(): MMAP2 with a build id only for events that asked (attr.build_id);
  // others get the device/inode form.
  for (auto& [fd, ev] : events_) {
    if (!ev->pub.enabled || ev->pub.exited || !WantsMmap(ev->pub.attr)) continue;
    int cpu = 0;
    for (const auto& [c, t] : running_) {
      if (t == tid) cpu = c;
    }
    if (!Follows(*ev, tid, cpu)) continue;
    perf::Record record;
    record.type = perf::kRecordMmap2;
    record.misc = perf::kMiscUser;
    perf::MmapRecord body = mmap;
    if (ev->pub.attr.build_id && !body.build_id.empty()) {
      record.misc |= perf::kMiscMmapBuildId;
    } else {
      body.build_id.clear();
    }
    record.body = body;
    Output(*ev, record, cpu, pid, tid);
  }
}

void KernelModel::Comm(int pid, int tid, const std::string& comm, bool exec) {
  perf::Record record;  // perf_event_comm_output()
  record.type = perf::kRecordComm;
  record.misc = exec ? perf::kMiscCommExec : 0;
  record.body = perf::CommRecord{static_cast<uint32_t>(pid), static_cast<uint32_t>(tid), comm, exec};
  SideBand(pid, tid, record, WantsComm);
}

void KernelModel::Fork(int pid, int ppid, int tid, int ptid) {
  task_pid_[tid] = pid;
  parent_of_[tid] = ptid;  // inherit_task_group(): children inherit events with attr.inherit
  perf::Record record;     // perf_event_task_output()
  record.type = perf::kRecordFork;
  record.body = perf::TaskRecord{static_cast<uint32_t>(pid), static_cast<uint32_t>(ppid),
                                 static_cast<uint32_t>(tid), static_cast<uint32_t>(ptid), clock_,
                                 false};
  SideBand(pid, tid, record, WantsTask);
}

void KernelModel::Exit(int pid, int tid) {
  // do_exit() -> perf_event_exit_task(): the EXIT record, then the task's own events leave
  // (pt_event_stop) and report POLLHUP; the task is gone for find_lively_task_by_vpid().
  perf::Record record;
  record.type = perf::kRecordExit;
  record.body = perf::TaskRecord{static_cast<uint32_t>(pid), static_cast<uint32_t>(pid),
                                 static_cast<uint32_t>(tid), static_cast<uint32_t>(tid), clock_,
                                 true};
  SideBand(pid, tid, record, WantsTask);
  for (auto& [fd, ev] : events_) {
    if (ev->pub.pid != tid) continue;
    StopPtOf(*ev);
    ev->pub.exited = true;
  }
  SchedOut(tid);
  exited_.insert(tid);
}

}  // namespace ptscope::record::testing
