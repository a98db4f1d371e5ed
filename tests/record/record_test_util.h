// Helpers shared by the record unit tests: run a command and capture its stdout (the oracles
// here are binutils, not our own code).
#pragma once

#include <cstdio>
#include <string>
#include <vector>

#include <unistd.h>

namespace ptscope::record::test {

inline std::string RunCommand(const std::string& command) {
  std::string out;
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof buffer, pipe)) > 0) out.append(buffer, n);
  pclose(pipe);
  return out;
}

inline std::string ToHexString(const std::vector<uint8_t>& bytes) {
  static const char* digits = "0123456789abcdef";
  std::string s;
  for (uint8_t b : bytes) {
    s += digits[b >> 4];
    s += digits[b & 15];
  }
  return s;
}

// The "Build ID: ..." value printed by `readelf -n PATH`, "" when absent.
inline std::string ReadelfBuildId(const std::string& path) {
  std::string out = RunCommand("readelf -n '" + path + "' 2>/dev/null");
  size_t at = out.find("Build ID: ");
  if (at == std::string::npos) return "";
  at += 10;
  size_t end = out.find_first_of(" \n", at);
  return out.substr(at, end - at);
}

inline std::string SelfExePath() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace ptscope::record::test
