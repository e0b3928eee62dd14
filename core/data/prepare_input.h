// `kiln prepare`'s inputs read as a stream of pieces to encode, in constant memory: each text
// file is a document, cut into pieces of about `piece_bytes` where no token can span the cut (at
// a line start, or in text with few of them, past 4 x piece_bytes, before a space); a
// JSON Lines file (`field` set) gives a document a line, its `field`, gathered into units of
// about `piece_bytes`. The cuts depend only on the bytes, never on how many threads encode the
// units, and a reader started at a position() gives the units a reader from the start gives
// from there: what `kiln prepare --resume` relies on.
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <vector>

namespace kiln {

// The inputs' files: each as given, or a glob's matches in sorted order (a glob that matches
// nothing, or a directory, is a UserError).
std::vector<std::string> prepare_input_files(const std::vector<std::string>& inputs);

// Where the next unit starts: a file, a byte in it, and that byte's line (for error messages).
struct InputPosition {
  int64_t file = 0;
  int64_t offset = 0;
  int64_t line = 1;
};

// Pieces encoded one after another; before each piece that starts a document goes the
// tokenizer's end-of-text id, where it has one.
struct EncodeUnit {
  std::vector<std::string> pieces;
  std::vector<char> starts_document;  // one per piece
  // Where its text starts: "corpus.txt, line 120", for an error the encoder finds in it.
  std::string origin;
};

class PrepareInput {
 public:
  PrepareInput(std::vector<std::string> files, std::string field, InputPosition start,
               int64_t piece_bytes);
  // The next unit, false after the last one.
  bool next(EncodeUnit& unit);
  InputPosition position() const { return at_; }
  // The bytes of the files before position(), and of all the files.
  int64_t bytes_done() const;
  int64_t bytes_total() const { return total_; }

 private:
  bool open_file();  // opens files_[at_.file] at at_.offset; false past the last file
  bool next_text(EncodeUnit& unit);
  bool next_json_lines(EncodeUnit& unit);
  bool fill(size_t wanted);  // reads until pending_ holds `wanted` bytes; false at the file's end

  std::vector<std::string> files_;
  std::vector<int64_t> sizes_;
  std::string field_;
  InputPosition at_;
  int64_t piece_bytes_;
  int64_t total_ = 0;
  std::ifstream in_;
  bool open_ = false;
  std::string pending_;  // text read from in_ past at_.offset, not yet in a unit
};

}  // namespace kiln
