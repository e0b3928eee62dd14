// Multiple-choice scoring that reads each context once: a batch of contexts, left-padded, is
// read into a key/value cache (core/layers/kv_cache.h), each context's cache is copied for each of
// its choices, and the choices are read on from there. The log-likelihoods are those of reading
// context + choice whole (core/train/task_scoring.h), to float rounding; the context's tokens are
// read once instead of once per choice. Only for requests none of whose sequences was cut to fit
// the model's context (a cut one starts each choice's sequence elsewhere); task_scoring.cpp
// scores those whole.
#pragma once

#include <cstddef>
#include <vector>

#include "core/train/task_scoring.h"

namespace kiln {

struct AssembledRun;

// Scores the sequences of `requests` (indices into prepared.task.requests): each one's
// log-likelihood into local[2 * s], and the tokens read for it into local[2 * s + 1] (a
// context's with its request's first choice). Collective under data parallelism as
// score_task: every rank calls it with the same requests.
void score_cached_choices(AssembledRun& run, const PreparedTask& prepared,
                          const std::vector<size_t>& requests, const TaskScoring& scoring,
                          std::vector<double>& local);

}  // namespace kiln
