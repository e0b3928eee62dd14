#include "core/util/text.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <cstdint>

#include <fmt/format.h>

namespace kiln {

std::string join(const std::vector<std::string>& parts, const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i)
    out += (i ? sep : "") + parts[i];
  return out;
}

std::string single_quoted(const std::string& text) {
  std::string out = "'";
  for (char c : text)
    out += c == '\'' ? std::string("''") : std::string(1, c);
  return out + "'";
}

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  size_t start = 0;
  while (true) {
    size_t end = s.find(sep, start);
    out.push_back(s.substr(start, end - start));
    if (end == std::string::npos) return out;
    start = end + 1;
  }
}

size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> row(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j)
    row[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    size_t diagonal = row[0];
    row[0] = i;
    for (size_t j = 1; j <= b.size(); ++j) {
      size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] != b[j - 1])});
      diagonal = above;
    }
  }
  return row[b.size()];
}

std::string nearest(const std::string& word, const std::vector<std::string>& candidates) {
  std::string best;
  size_t best_distance = std::max<size_t>(2, word.size() / 3) + 1;
  for (const auto& c : candidates) {
    size_t d = edit_distance(word, c);
    if (d < best_distance) {
      best_distance = d;
      best = c;
    }
  }
  return best;
}

std::string format_duration(double seconds) {
  if (seconds < 0 || seconds != seconds) return "?";
  auto s = static_cast<long>(seconds + 0.5);
  if (s >= 3600) return fmt::format("{}h{:02}m", s / 3600, (s % 3600) / 60);
  if (s >= 60) return fmt::format("{}m{:02}s", s / 60, s % 60);
  return fmt::format("{}s", s);
}

std::string format_bytes(double bytes) {
  constexpr double kKiB = 1024.0, kMiB = kKiB * 1024, kGiB = kMiB * 1024;
  if (bytes < kMiB) return fmt::format("{:.0f} KiB", bytes / kKiB);
  if (bytes < kGiB) return fmt::format("{:.0f} MiB", bytes / kMiB);
  if (bytes < 1e6 * kGiB) return fmt::format("{:.1f} GiB", bytes / kGiB);
  return fmt::format("{:.2g} GiB", bytes / kGiB);
}

bool is_valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80           ? 1
                       : (c >> 5) == 0x6  ? 2
                       : (c >> 4) == 0xE  ? 3
                       : (c >> 3) == 0x1E ? 4
                                          : 0;
    if (len == 0 || i + len > s.size()) return false;
    uint32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; ++k) {
      const auto cc = static_cast<unsigned char>(s[i + k]);
      if ((cc & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3F);
    }
    const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};  // below these: an overlong form
    if (cp < least[len] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += len;
  }
  return true;
}

std::u32string utf8_code_points(const std::string& s) {
  std::u32string out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 0x6 ? 2 : (c >> 4) == 0xE ? 3 : 4;
    char32_t cp = len == 1 ? c : c & (0xFF >> (len + 1));
    for (size_t k = 1; k < len && i + k < s.size(); ++k)
      cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
    out.push_back(cp);
    i += len;
  }
  return out;
}

std::string utf8_from_code_points(const std::u32string& points) {
  std::string out;
  for (char32_t cp : points) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
      continue;
    }
    const int len = cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    const unsigned lead[] = {0, 0, 0xC0, 0xE0, 0xF0};
    out += static_cast<char>(lead[len] | (cp >> (6 * (len - 1))));
    for (int k = len - 2; k >= 0; --k)
      out += static_cast<char>(0x80 | ((cp >> (6 * k)) & 0x3F));
  }
  return out;
}

bool is_python_space(char32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

std::string python_rstrip(const std::string& text) {
  const std::u32string points = utf8_code_points(text);
  size_t end = points.size();
  while (end > 0 && is_python_space(points[end - 1]))
    --end;
  return utf8_from_code_points(points.substr(0, end));
}

std::string python_strip(const std::string& text) {
  const std::u32string points = utf8_code_points(python_rstrip(text));
  size_t begin = 0;
  while (begin < points.size() && is_python_space(points[begin]))
    ++begin;
  return utf8_from_code_points(points.substr(begin));
}

std::string json_line_problem(const std::string& line, size_t byte) {
  if (!is_valid_utf8(line)) return "not UTF-8 text: convert the file to UTF-8";
  return fmt::format("not JSON (a syntax error at byte {})", byte);
}

std::string json_reason(const std::string& what) {
  const size_t code_end = what.find("] ");
  if (what.rfind("[json.exception.", 0) == 0 && code_end != std::string::npos) {
    return what.substr(code_end + 2);
  }
  return what;
}

std::string json_error_text(const std::string& file, const std::string& what) {
  const std::string why = json_reason(what);
  const std::string at = "parse error at line ";
  if (why.rfind(at, 0) == 0) {
    const size_t comma = why.find(", column ", at.size());
    const size_t colon = why.find(": ", at.size());
    if (comma != std::string::npos && colon != std::string::npos && comma < colon) {
      const std::string line = why.substr(at.size(), comma - at.size());
      const std::string column = why.substr(comma + 9, colon - comma - 9);
      return file + ":" + line + ":" + column + ": " + why.substr(colon + 2);
    }
  }
  return file + ": " + why;
}

std::optional<int64_t> parse_byte_size(const std::string& text) {
  size_t digits = 0;
  while (digits < text.size() && std::isdigit(static_cast<unsigned char>(text[digits])))
    ++digits;
  if (digits == 0 || digits > 15) return std::nullopt;  // 15 digits: far inside int64
  const int64_t count = std::stoll(text.substr(0, digits));
  std::string unit = text.substr(digits);
  if (!unit.empty() && unit.front() == ' ') unit.erase(0, 1);
  for (char& c : unit)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  static const std::pair<const char*, int64_t> kUnits[] = {{"", 1},
                                                           {"B", 1},
                                                           {"KB", 1000},
                                                           {"MB", 1000 * 1000},
                                                           {"GB", 1000000000},
                                                           {"KIB", int64_t{1} << 10},
                                                           {"MIB", int64_t{1} << 20},
                                                           {"GIB", int64_t{1} << 30}};
  for (const auto& [name, scale] : kUnits) {
    if (unit == name) {
      if (count < 1 || count > INT64_MAX / scale) return std::nullopt;
      return count * scale;
    }
  }
  return std::nullopt;
}

}  // namespace kiln
