// Which ranks of a world stopped answering, asked when a collective fails: every rank still
// running waits in that collective and times out with it, so each checks in through the
// rendezvous store, and those that never do (killed, stopped, their machine lost) are named
// with the pid, host and Slurm node they published when they joined.
#pragma once

#include <string>
#include <vector>

#include <c10/util/intrusive_ptr.h>

namespace c10d {
class Store;
}

namespace kiln {

// Publishes where this rank runs ("pid 812 on host gpu3 (Slurm node n3)") under `store`.
void publish_whereabouts(c10d::Store& store, int rank);

// Checks `rank` in under `store`, waits up to 5 s for the other ranks of `size` to check in, and
// describes each that did not: "rank 1 (pid 812 on host gpu3)". Empty when all did. Returns
// within 10 s even when the rank that stopped is rank 0, whose process serves the store.
std::vector<std::string> silent_ranks(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                      int size);

}  // namespace kiln
