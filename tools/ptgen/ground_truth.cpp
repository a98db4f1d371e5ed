#include "ground_truth.h"

namespace ptscope::ptgen {

namespace {
constexpr size_t kFlushBytes = 1u << 20;
}  // namespace

Result<std::unique_ptr<GroundTruthWriter>> GroundTruthWriter::Create(const std::string& path) {
  PTSCOPE_ASSIGN_OR_RETURN(format::OutputFile file, format::OutputFile::CreateInPlace(path));
  return std::unique_ptr<GroundTruthWriter>(new GroundTruthWriter(std::move(file)));
}

void GroundTruthWriter::Add(uint32_t tid, uint64_t ip) {
  char line[48];
  char* const end = line + sizeof line;
  char* p = end;
  *--p = '\n';
  do {
    *--p = "0123456789abcdef"[ip & 0xf];
    ip >>= 4;
  } while (ip != 0);
  *--p = 'x';
  *--p = '0';
  *--p = ' ';
  do {
    *--p = static_cast<char>('0' + tid % 10);
    tid /= 10;
  } while (tid != 0);
  buffer_.insert(buffer_.end(), p, end);
  if (buffer_.size() >= kFlushBytes) (void)Flush();  // an error is kept for Close()
}

Status GroundTruthWriter::Flush() {
  if (status_ && !buffer_.empty()) status_ = file_.Write(buffer_.data(), buffer_.size());
  buffer_.clear();
  return status_;
}

Status GroundTruthWriter::Close() {
  PTSCOPE_TRY(Flush());
  return file_.Commit();
}

}  // namespace ptscope::ptgen
