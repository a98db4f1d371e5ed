#include "sink/json_text.h"

namespace ptscope::decode {
namespace {

// Length of the valid UTF-8 sequence at text[at], 0 when it is not one (overlong forms,
// surrogates and code points past U+10FFFF are invalid, as RFC 3629 says).
size_t Utf8Length(std::string_view text, size_t at) {
  auto byte = [&](size_t i) { return static_cast<unsigned char>(text[i]); };
  const unsigned char lead = byte(at);
  size_t length = lead >= 0xf0 ? 4 : lead >= 0xe0 ? 3 : 2;
  if (lead < 0xc2 || lead > 0xf4 || at + length > text.size()) return 0;
  for (size_t i = 1; i < length; ++i) {
    if ((byte(at + i) & 0xc0) != 0x80) return 0;
  }
  const unsigned char second = byte(at + 1);
  if (lead == 0xe0 && second < 0xa0) return 0;  // overlong
  if (lead == 0xed && second > 0x9f) return 0;  // UTF-16 surrogate
  if (lead == 0xf0 && second < 0x90) return 0;  // overlong
  if (lead == 0xf4 && second > 0x8f) return 0;  // past U+10FFFF
  return length;
}

}  // namespace

void AppendJsonString(std::string& out, std::string_view text) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (size_t i = 0; i < text.size();) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x80) {
      size_t length = Utf8Length(text, i);
      if (length == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text.substr(i, length));
        i += length;
      }
      continue;
    }
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += static_cast<char>(c);
        }
    }
    ++i;
  }
  out += '"';
}

void AppendJsonKey(std::string& out, std::string_view key) {
  AppendJsonString(out, key);
  out += ": ";
}

void AppendJsonHex(std::string& out, const std::vector<uint8_t>& bytes) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (uint8_t b : bytes) {
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  out += '"';
}

}  // namespace ptscope::decode
