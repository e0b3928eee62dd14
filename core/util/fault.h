// Fault injection for the crash tests: named points in the code where a test can make the
// process fail as a power cut or a full disk would. KILN_FAULT="NAME:N" fires the point NAME the
// N-th time the process reaches it (N = 1 when left out), "NAME:N+" that time and every time
// after. Unset, a point costs one branch.
//
// Crash points (SIGKILL): snapshot.begun (a snapshot's folder made, nothing in it),
// snapshot.mid_file (part of model.pt written), snapshot.partial (model.pt written, the rest not),
// snapshot.unlisted (every file written and synced, no manifest), snapshot.unpublished (the
// manifest written too, not yet renamed into place), snapshot.published (renamed, not yet in the
// db; with checkpoint.async these six fire on the background writer's thread), store.uncommitted
// (rows inserted, COMMIT not yet run), prepare.unrecorded
// (`kiln prepare`: a batch's tokens written, the state that counts them not yet saved),
// prepare.publishing (the first finished shard renamed into the output folder, the rest not),
// snapshot.sending (a rank other than 0 about to send its part of a snapshot to rank 0),
// sweep.promotion_claimed (an asha worker's promotion claimed in the store, its member not yet
// started), probe.unscored (a step of a cooldown probe trained, the probe not yet scored).
// With KILN_FAULT_SIGNAL=STOP a crash point freezes the whole process (SIGSTOP) instead, so that a
// test can act while it stands there (send a stop signal in the middle of a snapshot's writing),
// then continue it (SIGCONT).
// grad.nonfinite: the N-th training step's gradients get an inf (after the gradient sync, before
// the precision policy looks at them), as an fp16 overflow or a bad batch would make.
// disk.full: the N-th file written through SyncedFileWriter (core/util/fs.h) fails with ENOSPC, for
// machines where a test cannot mount a small tmpfs.
// folder.no_exchange: the N-th exchange of a folder with its replacement (core/util/fs.h,
// replace_folder) is refused with EINVAL, as NFS and FUSE file systems refuse it.
// bench.busy_round: the N-th round of `kiln bench --set precision.type=auto` measures half the
// tokens/s it did, as when another process takes the cores during it.
// fsdp.keep_gathered: fsdp keeps a unit's whole parameters allocated after its forward or backward
// instead of freeing them (a leak, for the test that measured memory catches one).
#pragma once

namespace kiln {

// True when this is the visit to `name` that KILN_FAULT asks to fail.
bool fault_due(const char* name);
// SIGKILLs the process when fault_due(name) (or stops it: KILN_FAULT_SIGNAL).
void fault_point(const char* name);

}  // namespace kiln
