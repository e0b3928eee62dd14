// Slurm from Kiln's side: the sbatch script of a job array (one task per sweep member), and the
// Slurm commands Kiln runs (sbatch, squeue, sacct, scancel, scontrol), each started through
// core/util/process.h with its output captured. Slurm is asked, never mirrored: what a job is
// doing is what squeue (or sacct, for jobs squeue has forgotten) says at the time.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/util/process.h"

namespace kiln {

struct SlurmOptions {
  std::string partition;  // empty: the cluster's default
  std::string time;       // a task's time limit, as sbatch's --time takes it; empty: default
  int nodes = 1;
  // --nodes MIN-MAX: a task that loses nodes resumes its member at once on those left, down to
  // this many (core/app/slurm/task.h); 0: never on fewer than `nodes`.
  int min_nodes = 0;
  int ntasks_per_node = 0;  // ranks per node; 0: one per GPU, else 1
  int gpus_per_node = 0;
  int cpus_per_task = 1;
  int max_parallel = 0;  // array tasks running at once (%K); 0: as many as Slurm allows
  // Seconds before the time limit at which Slurm sends the task SIGUSR1: the member snapshots
  // and stops, and the task requeues itself.
  int signal_seconds = 120;
  std::vector<std::string> sbatch_args;  // passed on as #SBATCH lines, after Kiln's own
};

// The ranks one task of the job runs: nodes x ranks per node.
int ranks_per_job(const SlurmOptions& options);

// The job's sbatch options, one argument each (--partition=P, ...), the array excepted: its
// tasks write their Slurm logs to `folder`/%A_%a.out and start in `workdir`.
std::vector<std::string> sbatch_options(const SlurmOptions& options, const std::string& job_name,
                                        const std::string& folder, const std::string& workdir);
// Task indices as sbatch's --array takes them ("0-3", "1,3,5-6"), then "%K" when max_parallel
// is above 0.
std::string array_spec(const std::vector<int64_t>& tasks, int max_parallel);
// The script: an #SBATCH line for each option and the array, then `exec` of `command`, each
// word quoted for the shell. An option with a space, a quote, a backslash or '#' (a path) is
// quoted as sbatch reads its directives back; a newline in an option or the comment, which would
// end the directive and start a script line, is a UserError.
std::string sbatch_script(const std::vector<std::string>& options, const std::string& array,
                          const std::vector<std::string>& command, const std::string& comment);

// Runs `argv` (argv[0] looked up on PATH), waiting for it; a UserError when it is not installed.
CapturedRun run_slurm_tool(const std::vector<std::string>& argv);
// A UserError "sbatch is not on PATH: ..." before anything is written.
void require_sbatch();
// Submits the script; its job id, or a UserError with sbatch's own error on one line.
std::string submit_batch(const std::string& script_path);
// The state of each array task of `job_ids` that Slurm still knows, by task index: squeue's
// (PENDING, RUNNING, ...), then sacct's for the ones squeue has forgotten where accounting is
// on. A later job's task wins over an earlier one's. Empty when Slurm's tools are missing.
std::map<int64_t, std::string> array_task_states(const std::vector<std::string>& job_ids);
// The jobs of `job_ids` that still have a task pending or running.
std::vector<std::string> queued_jobs(const std::vector<std::string>& job_ids);

}  // namespace kiln
