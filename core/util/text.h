// Small string helpers shared by the config loader, the CLI and the console.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

std::string join(const std::vector<std::string>& parts, const std::string& sep);
// A size as transformers' save_pretrained(max_shard_size=...) spells it: a whole number of bytes,
// optionally followed by B, KB, MB, GB (powers of 1000) or KiB, MiB, GiB (of 1024), in any case;
// none when `text` is not one or is below 1 byte.
std::optional<int64_t> parse_byte_size(const std::string& text);
std::vector<std::string> split(const std::string& s, char sep);
// `text` in single quotes, each quote in it doubled ('it''s'): a string literal of SQL and of the
// --where language, for names read from a store, never for input.
std::string single_quoted(const std::string& text);
size_t edit_distance(const std::string& a, const std::string& b);
// The candidate closest to `word`, or "" when none is close enough to be a plausible typo.
std::string nearest(const std::string& word, const std::vector<std::string>& candidates);
// "1h02m", "3m05s", "12s": how long an ETA or a run takes, readable at a glance.
std::string format_duration(double seconds);
// "512 KiB", "3.2 GiB", "1.5e+10 GiB": a memory size readable at a glance, however absurd.
std::string format_bytes(double bytes);
// Whether `s` is well-formed UTF-8: no stray continuation byte, overlong form, surrogate or
// code point past U+10FFFF.
bool is_valid_utf8(const std::string& s);
// Well-formed UTF-8 `s` as code points (what Python's len() counts), and back.
std::u32string utf8_code_points(const std::string& s);
std::string utf8_from_code_points(const std::u32string& points);
// Whether `cp` is whitespace to Python's str.isspace(), what str.strip() and rstrip() remove.
bool is_python_space(char32_t cp);
// Python's text.rstrip() and text.strip() of well-formed UTF-8.
std::string python_rstrip(const std::string& text);
std::string python_strip(const std::string& text);

// Why a JSON Lines line did not parse, the parser having stopped at `byte`: "not UTF-8 (convert
// the file to UTF-8)" when the line is not, else "not JSON (a syntax error at byte N)".
std::string json_line_problem(const std::string& line, size_t byte);

// A JSON library's message without its bracketed code ("[json.exception.out_of_range.406] ").
std::string json_reason(const std::string& what);
// A JSON library's error for `file` as Kiln reports one: "FILE:LINE:COL: why" for a syntax error
// (nlohmann's "[json.exception.parse_error.101] parse error at line 3, column 5: syntax error
// ..."), "FILE: why" otherwise, without the library's bracketed code.
std::string json_error_text(const std::string& file, const std::string& what);

}  // namespace kiln
