// kiln's malloc settings, linked in with jemalloc (CMakeLists.txt, KILN_JEMALLOC).
//
// A training step allocates and frees the same large tensors every step: a GPT-2-vocabulary
// head's logits, their log-softmax and gradients are ~100 MB each at 512 rows. glibc's malloc
// maps every allocation over 32 MB afresh and unmaps it when freed, so each step pays a page
// fault per 4 KiB of them again: on a 2-vCPU EPYC VM that was 90% of the step
// (docs/benchmarks.md, "The memory allocator"). jemalloc, told never to return freed pages to
// the system (dirty and muzzy decay off), hands the next step the same pages. A process keeps
// its peak resident memory until it exits; MALLOC_CONF, read after this, can change it.

// jemalloc reads this global of the executable's at start-up (jemalloc(3), "malloc_conf").
extern "C" {
extern const char* malloc_conf;
const char* malloc_conf = "dirty_decay_ms:-1,muzzy_decay_ms:-1";
}
