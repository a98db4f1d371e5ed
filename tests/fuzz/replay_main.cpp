// Runs a fuzz target on files, as libFuzzer runs the inputs it is given one by one, for the test
// suite (which builds without libFuzzer): every seed of corpus/TARGET and every regression input
// of regressions/TARGET. Fails when an input raises the process's peak memory above 1 GiB (what
// no input may cost); a crash or a sanitizer finding ends the process, and a hang meets the
// test's timeout. Arguments: files or directories (their regular files, in name order).
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) int LLVMFuzzerInitialize(int* argc, char*** argv);

namespace {

constexpr long kMaxRssKib = 1024 * 1024;

long PeakRssKib() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_maxrss;
}

}  // namespace

int main(int argc, char** argv) {
  if (LLVMFuzzerInitialize != nullptr) LLVMFuzzerInitialize(&argc, &argv);
  std::vector<std::string> inputs;
  for (int i = 1; i < argc; ++i) {
    std::error_code ec;
    if (std::filesystem::is_directory(argv[i], ec)) {
      std::vector<std::string> files;
      for (const auto& entry : std::filesystem::directory_iterator(argv[i])) {
        if (entry.is_regular_file()) files.push_back(entry.path().string());
      }
      std::sort(files.begin(), files.end());
      inputs.insert(inputs.end(), files.begin(), files.end());
    } else {
      inputs.push_back(argv[i]);
    }
  }
  if (inputs.empty()) {
    std::fprintf(stderr, "no inputs given (a missing corpus directory?)\n");
    return 1;
  }
  for (const std::string& path : inputs) {
    std::ifstream in(path, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(in)), {});
    if (!in.eof() && in.fail()) {
      std::fprintf(stderr, "%s: cannot read\n", path.c_str());
      return 1;
    }
    LLVMFuzzerTestOneInput(bytes.data(), bytes.size());
    if (PeakRssKib() > kMaxRssKib) {
      std::fprintf(stderr, "%s: peak memory %ld KiB, over the 1 GiB any input may cost\n",
                   path.c_str(), PeakRssKib());
      return 1;
    }
  }
  std::printf("%zu inputs, peak memory %ld KiB\n", inputs.size(), PeakRssKib());
  return 0;
}
