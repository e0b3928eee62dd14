#include "core/config/toml_text.h"

#include <vector>

#include <fmt/format.h>

#include "core/util/error.h"

namespace kiln {

namespace {

struct TomlTextProblem {
  int64_t line = 0;
  int64_t column = 0;
  std::string what;
};

// Nothing when `text` is safe to parse; otherwise the first character that is not (see the
// header for why).
std::optional<TomlTextProblem> unsafe_toml_text(const std::string& text) {
  // A small TOML lexer, conservative: a non-ASCII byte passes only where it is surely inside a
  // comment or a string value as toml++ reads them. (Where this lexer and the parser could
  // disagree, as inside a malformed value, the text is outside any string for it.)
  enum class Nesting { kArray, kInlineTable };
  std::vector<Nesting> nesting;
  bool key_next = true;      // a string here would be a key (line start, [header], `{`, `,` in {})
  bool value_start = false;  // a value may start here (after `=`, `[` or `,` in an array)
  int key_parts = 1;         // of the key being read, while key_next
  int64_t line = 1, column = 1;
  size_t i = 0;
  const size_t n = text.size();
  auto byte = [&](size_t at) { return static_cast<unsigned char>(text[at]); };
  auto step = [&] {
    const unsigned char c = byte(i++);
    if (c == '\n') {
      ++line;
      column = 1;
    } else if ((c & 0xC0) != 0x80) {
      ++column;  // columns count characters: UTF-8 continuation bytes do not move them
    }
  };
  auto problem = [&](const std::string& what) {
    return std::optional<TomlTextProblem>(TomlTextProblem{line, column, what});
  };
  auto blank = [](unsigned char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\n'; };
  const std::string outside =
      "a non-ASCII character outside a string or comment: TOML allows them only in those";
  const std::string in_key =
      "a non-ASCII character in a key: Kiln's keys are ASCII (`kiln plugins` lists them)";
  const std::string long_key = fmt::format(
      "a key of more than {} dotted parts: Kiln's keys are section.key", kTomlMaxKeyParts);
  const std::string deep = fmt::format(
      "arrays or inline tables nested more than {} deep: Kiln's values are numbers, strings, "
      "booleans and lists of them",
      kTomlMaxNesting);
  if (text.compare(0, 3, "\xEF\xBB\xBF") == 0) i = 3;  // a UTF-8 byte order mark
  while (i < n) {
    const unsigned char c = byte(i);
    if (c >= 0x80) return problem(outside);
    if (c == '#') {
      while (i < n && byte(i) != '\n')
        step();
      continue;
    }
    if ((c == '"' || c == '\'') && (key_next || value_start)) {
      const bool key = key_next, basic = c == '"';
      value_start = false;
      const std::string triple(3, static_cast<char>(c));
      if (text.compare(i, 3, triple) == 0) {
        for (int k = 0; k < 3; ++k)
          step();
        while (i < n) {
          const unsigned char d = byte(i);
          if (d >= 0x80 && key) return problem(in_key);
          if (basic && d == '\\') {
            step();
            if (i >= n) break;
            if (byte(i) >= 0x80) {
              return problem("a non-ASCII character right after a backslash: write it as \\uXXXX");
            }
            if (blank(byte(i))) {
              // A line-ending backslash: the whitespace and line breaks after it are trimmed.
              while (i < n && blank(byte(i)))
                step();
              if (i < n && byte(i) >= 0x80) {
                return problem(
                    "a non-ASCII character first after a line-ending backslash in a \"\"\" "
                    "string: write it as \\uXXXX, or begin the line with an ASCII character");
              }
              continue;
            }
            step();  // the escaped character
            continue;
          }
          if (text.compare(i, 3, triple) == 0) {
            while (i < n && byte(i) == c)  // up to two quotes more belong to the string
              step();
            break;
          }
          step();
        }
      } else {
        step();
        while (i < n && byte(i) != '\n') {
          const unsigned char d = byte(i);
          if (d >= 0x80 && key) return problem(in_key);
          step();
          if (basic && d == '\\') {
            if (i < n && byte(i) != '\n') {
              if (byte(i) >= 0x80 && key) return problem(in_key);
              step();  // the escaped character
            }
            continue;
          }
          if (d == c) break;
        }
      }
      continue;
    }
    // `[` and `{` open an array or inline table only where a value starts. Elsewhere (after a
    // malformed value, as in `x = 0X["...`) toml++ reads no array, and a string after them is
    // none for it either.
    const bool opens_value = (c == '[' || c == '{') && value_start && !key_next;
    if (!blank(c)) value_start = false;
    if (opens_value && nesting.size() >= static_cast<size_t>(kTomlMaxNesting)) {
      return problem(deep);
    }
    if (c == '\n') {
      if (nesting.empty()) {
        key_next = true;
        key_parts = 1;
      } else if (nesting.back() == Nesting::kArray) {
        value_start = true;  // arrays span lines; a value may follow (or `,`, `]`)
      }
    } else if (c == '.' && key_next) {
      if (++key_parts > kTomlMaxKeyParts) return problem(long_key);
    } else if (c == '=' && key_next) {
      key_next = false;
      value_start = true;
    } else if (c == '[' && opens_value) {
      nesting.push_back(Nesting::kArray);  // (`[` where a key goes opens a [table] header)
      value_start = true;
    } else if (c == ']') {
      if (!nesting.empty() && nesting.back() == Nesting::kArray) nesting.pop_back();
    } else if (c == '{' && opens_value) {
      nesting.push_back(Nesting::kInlineTable);
      key_next = true;
      key_parts = 1;
    } else if (c == '}') {
      if (!nesting.empty() && nesting.back() == Nesting::kInlineTable) {
        nesting.pop_back();
        key_next = false;
      }
    } else if (c == ',' && !nesting.empty()) {
      key_next = nesting.back() == Nesting::kInlineTable;
      value_start = !key_next;
      key_parts = 1;
    }
    step();
  }
  return std::nullopt;
}

[[noreturn]] void syntax_error(const std::string& source, int64_t line, int64_t column,
                               const std::string& what) {
  // (line 0: the parser did not say where; the source alone is named then.)
  const std::string where = line > 0 ? fmt::format("{}:{}:{}", source, line, column) : source;
  throw UserError(where + ": TOML syntax error: " + what);
}

}  // namespace

toml::table parse_toml(const std::string& text, const std::string& source) {
  if (auto problem = unsafe_toml_text(text)) {
    syntax_error(source, problem->line, problem->column, problem->what);
  }
  try {
    return toml::parse(text, source);
  } catch (const toml::parse_error& e) {
    const auto& begin = e.source().begin;
    syntax_error(source, static_cast<int64_t>(begin.line), static_cast<int64_t>(begin.column),
                 std::string(e.description()));
  }
}

std::optional<toml::table> try_parse_toml(const std::string& text) {
  if (unsafe_toml_text(text)) return std::nullopt;
  try {
    return toml::parse(text);
  } catch (const toml::parse_error&) {
    return std::nullopt;
  }
}

std::optional<ParamValue> scalar_value(const toml::node& node) {
  if (const auto* v = node.as_integer()) return ParamValue(v->get());
  if (const auto* v = node.as_floating_point()) return ParamValue(v->get());
  if (const auto* v = node.as_boolean()) return ParamValue(v->get());
  if (const auto* v = node.as_string()) return ParamValue(v->get());
  return std::nullopt;
}

}  // namespace kiln
