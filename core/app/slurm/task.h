// `kiln sweep task NAME --db DB`: what each array task of a sweep submitted with --launcher slurm
// runs (core/app/slurm/sweep.h writes the command into the job script). It finds its member in the
// run store by SLURM_ARRAY_TASK_ID and runs it as the local runner would
// (core/app/sweeps/member.h): a member without a run starts, one with a run resumes from its latest
// snapshot, a completed one exits 0 at once, so running a task again is always safe. A member of
// several Slurm tasks (--nodes,
// --gpus-per-node) runs its ranks under srun, MASTER_ADDR the first host of the job's nodes.
//
// Signals: SIGTERM or SIGINT (scancel, preemption) is passed on to the member, which snapshots
// and stops as interrupted; Slurm requeues a preempted task itself. SIGUSR1, which the script
// asks for before the time limit (--signal=B:USR1@N), does the same and then requeues the task
// with `scontrol requeue`, so that it resumes when it runs again. A member interrupted with no
// signal here lost a rank (a node lost, a process killed or hung: the other ranks stop within
// parallel.timeout_s; or rank 0 itself, which then leaves its run `running`): the task requeues
// itself too, when the member saved a newer snapshot than the one the task started from. With
// --nodes MIN-MAX it first goes on at once on the nodes that remain, when the member can go on
// there as the same run (core/app/slurm/node_range.h), and says what became of its batch.
#pragma once

#include <functional>
#include <string>

namespace kiln {

// The exit code: 0 when the member completed (now or before), kExitInterrupted when a signal
// stopped it, kExitSomeFailed when it failed.
int run_sweep_task(const std::string& db, const std::string& name,
                   const std::function<void(const std::string&)>& print);

}  // namespace kiln
