// JSON text for pt-decode's machine-readable outputs (docs/DECODE_JSON.md): strings escaped per
// RFC 8259. Names come from binaries and may hold any bytes; JSON text must be UTF-8, so a byte
// that does not begin a valid UTF-8 sequence becomes U+FFFD (the only change made to a name).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ptscope::decode {

// Appends `text` as a quoted JSON string.
void AppendJsonString(std::string& out, std::string_view text);
// "\"name\": " for an object member.
void AppendJsonKey(std::string& out, std::string_view key);
// Lower-case hex of `bytes` as a JSON string ("" when empty).
void AppendJsonHex(std::string& out, const std::vector<uint8_t>& bytes);

}  // namespace ptscope::decode
