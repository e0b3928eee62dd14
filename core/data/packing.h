// Packing several documents into one row (data.pack), as torchtune, LitGPT and TRL pack
// fine-tuning records: the rows hold tokens instead of padding, and each token's position within
// its own document (Batch::positions, core/layers/document_positions.h) keeps attention inside the
// document and restarts the position embeddings where a document starts.
#pragma once

#include <cstdint>
#include <vector>

namespace kiln {

// Rows of documents packed in order: row g holds documents [rows[g], rows[g + 1]). Document d
// fills `lengths[d]` of a row's `row_length` places and joins the row being filled while it has
// room, else starts the next one; nothing is reordered, so the rows are a pure function of the
// documents (the same at any world size). Every length must be in [1, row_length].
std::vector<int64_t> pack_in_order(const std::vector<int64_t>& lengths, int64_t row_length);

// Positions for `count` tokens of pretraining text whose documents each end with `separator`
// (GPT-2's <|endoftext|>): 0 at the first token and after each separator, else one more than the
// token before. The separator is its document's last token; its target, the next document's
// first token, is not a prediction the loss should count (the caller's mask).
void positions_after_separators(const int64_t* tokens, int64_t count, int64_t separator,
                                int64_t* positions);

}  // namespace kiln
