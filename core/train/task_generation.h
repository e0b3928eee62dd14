// Scoring a generate task (exact_match): the prompts cut to leave max_gen_toks of room, read
// once into a key/value cache (left-padded in batches, core/layers/kv_cache.h), then continued
// token by token (greedy, or sampled by a draw that is the same in any batch or shard) until a
// stop string, the end-of-text token or max_gen_toks. Apart from task_scoring.cpp, which
// prepares and scores choice tasks and calls these for generate ones (the scoring itself is
// described in task_scoring.h).
#pragma once

#include <cstdint>
#include <vector>

#include "core/data/task_file.h"
#include "core/train/task_scoring.h"

namespace kiln {

struct AssembledRun;
class Tokenizer;

// The prompts of a generate task, cut from the left to leave max_gen_toks of room.
std::vector<std::vector<uint32_t>> generation_prompts(const Task& task, const Tokenizer& tokenizer,
                                                      int64_t block, int64_t& truncated);

// The prompts' continuations generated and compared with the answers: result's details, tokens
// and exact_match. Collective under data parallelism, as score_task.
void score_generations(AssembledRun& run, const Tokenizer& tokenizer, const PreparedTask& prepared,
                       const TaskScoring& scoring, TaskResult& result);

}  // namespace kiln
