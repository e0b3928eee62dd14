// Whether this process keeps the memory it frees for reuse, under jemalloc (linked into kiln:
// CMakeLists.txt, KILN_JEMALLOC); under any other malloc every call here does nothing.
//
// A training step allocates and frees the same large tensors every step: a GPT-2-vocabulary
// head's logits, their log-softmax and gradients are ~100 MB each at 512 rows. A malloc that
// returns freed pages to the system faults each 4 KiB page of them in again the next step: on a
// 2-vCPU VM, jemalloc on its defaults (freed pages returned over 10 s) trained the LoRA example at
// 569 tokens/s and with them kept at 7,803 (docs/benchmarks.md, "The memory allocator"). So a
// process that trains keeps them (keep_freed_memory), and holds its peak resident memory while it
// trains.
//
// Every other process stays on jemalloc's defaults, the long-lived ones above all: `kiln serve`
// and the parents of sweeps, launches and Slurm tasks, whose peaks (a large query, a member's
// start) are one-off. A MALLOC_CONF that sets a decay (dirty_decay_ms, muzzy_decay_ms) wins over
// both, so that one binary can be timed either way (tools/bench/malloc.sh).
#pragma once

namespace kiln {

// From now on, freed pages stay with the process: every arena's dirty and muzzy decay off.
void keep_freed_memory();

// Returns the freed pages every arena holds to the system at once (arena.<ALL>.purge): after an
// evaluation or a task scoring, whose shapes differ from a training step's and from each
// other's, so that their peaks do not stay resident beside training's.
void return_freed_memory();

}  // namespace kiln
