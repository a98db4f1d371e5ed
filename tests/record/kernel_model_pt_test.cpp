// The model's Intel PT rules, one by one, as raw system calls (no ptscope code but the record
// parser): what the kernel's intel_pt driver and AUX code make user space see. These cannot be
// compared with this machine's kernel (no Intel PT here); each expectation cites the function.
#include <doctest/doctest.h>

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "kernel_model.h"
#include "perf_ring.h"
#include "pt_stream.h"

namespace ptscope::record::testing {
namespace {

const uint64_t kPage = static_cast<uint64_t>(::getpagesize());

struct PtEvent {
  KernelModel& model;
  int fd = -1;
  perf_event_mmap_page* page = nullptr;
  uint8_t* aux = nullptr;
  uint64_t aux_size = 0;

  PtEvent(KernelModel& m, int tid, uint64_t aux_pages, bool snapshot, uint32_t watermark = 0)
      : model(m) {
    perf_event_attr attr{};
    attr.size = sizeof attr;
    attr.type = m.host().pt_type;
    attr.config = 1 | (1u << 13) | (1u << 10);  // pt, branch, tsc
    attr.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_IDENTIFIER;
    attr.sample_id_all = 1;
    attr.exclude_kernel = 1;
    attr.disabled = 1;
    attr.aux_watermark = watermark;
    fd = m.Open(attr, tid, -1, -1, 0);
    REQUIRE(fd >= 0);
    void* base = m.Map(fd, 9 * kPage, PROT_READ | PROT_WRITE, 0);
    REQUIRE(base != MAP_FAILED);
    page = static_cast<perf_event_mmap_page*>(base);
    aux_size = aux_pages * kPage;
    page->aux_offset = 9 * kPage;
    page->aux_size = aux_size;
    void* area = m.Map(fd, aux_size, PROT_READ | (snapshot ? 0 : PROT_WRITE), 9 * kPage);
    REQUIRE(area != MAP_FAILED);
    aux = static_cast<uint8_t*>(area);
    REQUIRE(m.Ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) == 0);
  }

  // The records in the data ring since the last call.
  std::vector<perf::Record> Records() {
    std::vector<uint8_t> bytes;
    DataRingView ring{page, reinterpret_cast<uint8_t*>(page) + kPage, 8 * kPage};
    DrainDataRing(ring, &bytes);
    std::vector<perf::Record> records;
    perf::RecordIterator it(bytes, perf::RecordLayout{0x10086, true});
    while (auto next = it.Next()) {
      REQUIRE(*next);
      records.push_back(next->value());
    }
    return records;
  }
};

const int kTid = ::getpid();  // the model's tasks must exist for find_lively_task_by_vpid()

TEST_CASE("model PT: snapshot mode moves aux_head only at sched-out, as an offset, with one AUX "
          "record per sched-out (pt_event_stop, perf_aux_output_end)") {
  KernelModel model;
  PtEvent ev(model, kTid, 4, /*snapshot=*/true);
  model.SchedIn(kTid, kTid, 0);
  std::vector<perf::Record> records = ev.Records();
  REQUIRE(records.size() == 1);
  CHECK(records[0].type == perf::kRecordItraceStart);  // perf_log_itrace_start()
  const std::vector<uint8_t> stream = MakePtStream(3 * kPage);
  model.WritePt(kTid, stream);
  CHECK(ev.page->aux_head == 0);  // the hardware writes; the kernel has not looked yet
  model.SchedOut(kTid);
  CHECK(ev.page->aux_head == 3 * kPage);
  CHECK(std::memcmp(ev.aux, stream.data(), stream.size()) == 0);
  records = ev.Records();
  REQUIRE(records.size() == 1);
  const auto& aux = std::get<perf::AuxRecord>(records[0].body);
  CHECK(aux.aux_offset == 3 * kPage);
  CHECK(aux.aux_size == 4 * kPage);  // the whole buffer: "size" is the buffer in overwrite mode
  CHECK(aux.flags == perf::kAuxFlagOverwrite);
  // Around the ring: the head is an offset again, never a running count.
  model.SchedIn(kTid, kTid, 0);
  model.WritePt(kTid, stream);
  model.SchedOut(kTid);
  CHECK(ev.page->aux_head == 2 * kPage);  // 6 pages written into a 4-page ring
  records = ev.Records();
  REQUIRE(records.size() == 1);  // no second ITRACE_START
  CHECK(records[0].type == perf::kRecordAux);
}

TEST_CASE("model PT: full mode commits at the watermark (PMI) and stops, TRUNCATED and disabled, "
          "when the buffer is full (pt_handle_status, perf_aux_output_end)") {
  KernelModel model;
  PtEvent ev(model, kTid, 4, /*snapshot=*/false, /*watermark=*/static_cast<uint32_t>(kPage));
  model.SchedIn(kTid, kTid, 1);
  (void)ev.Records();
  const std::vector<uint8_t> stream = MakePtStream(8 * kPage);
  model.WritePt(kTid, std::span(stream).first(2 * kPage + 10));
  CHECK(ev.page->aux_head == 2 * kPage);  // two PMIs so far
  std::vector<perf::Record> records = ev.Records();
  REQUIRE(records.size() == 2);
  CHECK(std::get<perf::AuxRecord>(records[1].body).aux_offset == kPage);
  CHECK(std::get<perf::AuxRecord>(records[1].body).aux_size == kPage);
  // Nobody consumes (aux_tail stays 0): the rest does not fit. The last byte of the ring always
  // stays free (CIRC_SPACE).
  model.WritePt(kTid, std::span(stream).subspan(2 * kPage + 10));
  CHECK(ev.page->aux_head == 4 * kPage - 1);
  records = ev.Records();
  REQUIRE(!records.empty());
  const auto& last = std::get<perf::AuxRecord>(records.back().body);
  CHECK((last.flags & perf::kAuxFlagTruncated) != 0);
  CHECK(model.Event(ev.fd)->enabled == false);  // perf_event_disable_inatomic()
  // Disabled, it writes nothing more until the reader enables it again.
  model.WritePt(kTid, stream);
  CHECK(ev.page->aux_head == 4 * kPage - 1);
  CHECK(ev.Records().empty());
  // Enabled with the buffer still full: no room, disabled again at once (perf_aux_output_begin).
  REQUIRE(model.Ioctl(ev.fd, PERF_EVENT_IOC_ENABLE, 0) == 0);
  CHECK(model.Event(ev.fd)->enabled == false);
  // Consumed, then enabled: tracing resumes where the data stopped.
  ev.page->aux_tail = ev.page->aux_head;
  REQUIRE(model.Ioctl(ev.fd, PERF_EVENT_IOC_ENABLE, 0) == 0);
  CHECK(model.Event(ev.fd)->enabled == true);
}

TEST_CASE("model PT: a VMX transition flags the transaction PARTIAL (intel_pt_handle_vmx)") {
  KernelModel model;
  PtEvent ev(model, kTid, 4, /*snapshot=*/false);
  model.SchedIn(kTid, kTid, 0);
  (void)ev.Records();
  model.WritePt(kTid, MakePtStream(100));
  model.FlagAux(kTid, perf::kAuxFlagPartial);
  model.SchedOut(kTid);
  std::vector<perf::Record> records = ev.Records();
  REQUIRE(records.size() == 1);
  CHECK(std::get<perf::AuxRecord>(records[0].body).flags == perf::kAuxFlagPartial);
  CHECK(std::get<perf::AuxRecord>(records[0].body).aux_size == 100);
}

TEST_CASE("model PT: the AUX area is at most 2 GiB (rb_alloc_aux) and needs its PMU") {
  ModelHost host;
  host.cap_ipc_lock = true;  // the accounting is not what this checks
  KernelModel model(host);
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = host.pt_type;
  attr.config = 1 | (1u << 13);
  attr.exclude_kernel = 1;
  const int fd = model.Open(attr, kTid, -1, -1, 0);
  REQUIRE(fd >= 0);
  void* base = model.Map(fd, 2 * kPage, PROT_READ | PROT_WRITE, 0);
  REQUIRE(base != MAP_FAILED);
  auto* page = static_cast<perf_event_mmap_page*>(base);
  page->aux_offset = 2 * kPage;
  page->aux_size = 4ull << 30;
  CHECK(model.Map(fd, 4ull << 30, PROT_READ, 2 * kPage) == MAP_FAILED);
  CHECK(errno == ENOMEM);
  // An attr.config bit intel_pt does not have: pt_event_valid() refuses it.
  attr.config |= 1ull << 40;
  CHECK(model.Open(attr, kTid, -1, -1, 0) == -1);
  CHECK(errno == EINVAL);
}

TEST_CASE("model PT: address filters as perf_event_parse_addr_filter and the driver take them") {
  KernelModel model;
  PtEvent ev(model, kTid, 4, true);
  auto set = [&](const char* filter) {
    return model.Ioctl(ev.fd, PERF_EVENT_IOC_SET_FILTER, reinterpret_cast<unsigned long>(filter)) == 0
               ? 0 : errno;
  };
  CHECK(set("filter 0x1000/0x100@/bin/sh") == 0);
  CHECK(set("filter 0x1000@/bin/sh") == EINVAL);         // filter needs a size
  CHECK(set("start 0x1000/0x10@/bin/sh") == EOPNOTSUPP);  // pt: no start filters
  CHECK(set("stop 0x1000@/bin/sh") == EOPNOTSUPP);        // pt: no single addresses
  CHECK(set("filter 0x1/1@/bin/sh,filter 0x2/1@/bin/sh,filter 0x3/1@/bin/sh") == EOPNOTSUPP);
  CHECK(set("filter 0x1000/0x100@/no/such/file") == ENOENT);
}

}  // namespace
}  // namespace ptscope::record::testing
