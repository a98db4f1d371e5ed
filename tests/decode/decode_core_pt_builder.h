// Test helpers: PT packets through libipt's encoder, and a code image in a temp file.
#pragma once

#include <intel-pt.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace ptscope::decode::testing {

class PtBuilder {
 public:
  PtBuilder() : buffer_(1 << 16) {
    pt_config config;
    pt_config_init(&config);
    config.begin = buffer_.data();
    config.end = buffer_.data() + buffer_.size();
    encoder_ = pt_alloc_encoder(&config);
  }
  ~PtBuilder() { pt_free_encoder(encoder_); }

  void Put(pt_packet packet) {
    int written = pt_enc_next(encoder_, &packet);
    if (written < 0) std::fprintf(stderr, "pt_enc_next failed: %d\n", written);
    size_ += written > 0 ? static_cast<size_t>(written) : 0;
  }
  void Simple(pt_packet_type type) {
    pt_packet p{};
    p.type = type;
    Put(p);
  }
  // PSB+ with TSC, CBR and MODE.Exec; FUP(ip) when tracing is on at the PSB.
  void Psb(uint64_t tsc, uint64_t fup_ip, uint8_t cbr = 1) {
    Simple(ppt_psb);
    Tsc(tsc);
    pt_packet c{};
    c.type = ppt_cbr;
    c.payload.cbr.ratio = cbr;
    Put(c);
    Mode64();
    if (fup_ip != 0) Ip(ppt_fup, fup_ip);
    Simple(ppt_psbend);
  }
  void Mode64() {
    pt_packet m{};
    m.type = ppt_mode;
    m.payload.mode.leaf = pt_mol_exec;
    m.payload.mode.bits.exec = pt_set_exec_mode(ptem_64bit);
    Put(m);
  }
  void Tsc(uint64_t tsc) {
    pt_packet t{};
    t.type = ppt_tsc;
    t.payload.tsc.tsc = tsc;
    Put(t);
  }
  void Cyc(uint64_t cycles) {
    pt_packet c{};
    c.type = ppt_cyc;
    c.payload.cyc.value = cycles;
    Put(c);
  }
  // Taken/not-taken bits, oldest first.
  void Tnt(const std::vector<bool>& bits) {
    pt_packet t{};
    t.type = ppt_tnt_8;
    t.payload.tnt.bit_size = static_cast<uint8_t>(bits.size());
    for (bool bit : bits) t.payload.tnt.payload = (t.payload.tnt.payload << 1) | (bit ? 1 : 0);
    Put(t);
  }
  void Ip(pt_packet_type type, uint64_t ip) {
    pt_packet p{};
    p.type = type;
    p.payload.ip.ipc = ip == 0 ? pt_ipc_suppressed : pt_ipc_sext_48;
    p.payload.ip.ip = ip;
    Put(p);
  }
  void Raw(const std::vector<uint8_t>& bytes) {
    for (uint8_t b : bytes) buffer_[size_++] = b;
    pt_enc_sync_set(encoder_, size_);
  }
  std::vector<uint8_t> bytes() const { return {buffer_.begin(), buffer_.begin() + size_}; }

 private:
  std::vector<uint8_t> buffer_;
  size_t size_ = 0;
  pt_encoder* encoder_ = nullptr;
};

// A file holding raw code bytes, removed on destruction.
class CodeFile {
 public:
  explicit CodeFile(const std::vector<uint8_t>& code) {
    char name[] = "/tmp/ptscope-code-XXXXXX";
    int fd = ::mkstemp(name);
    path_ = name;
    if (fd >= 0) {
      if (::write(fd, code.data(), code.size()) != static_cast<ssize_t>(code.size())) path_.clear();
      ::close(fd);
    }
  }
  ~CodeFile() { ::unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace ptscope::decode::testing
