// What a snapshot command reads (command_inputs.h).
#include "core/app/run/command_inputs.h"

#include <filesystem>
#include <system_error>

#include <fmt/format.h>

#include "core/util/fs.h"

namespace kiln {

std::vector<CommandInput> recorded_inputs(const std::vector<RunInput>& recorded) {
  std::vector<CommandInput> out;
  for (const RunInput& input : recorded) {
    const std::string what = "the run's " + input.key;
    std::error_code ec;
    if (std::filesystem::is_directory(input.resolved, ec)) out.push_back({input.resolved, what});
    for (const FileFingerprint& file : input.files)
      out.push_back({file.path, what});
  }
  return out;
}

std::vector<CommandInput> task_inputs(const std::vector<Task>& tasks) {
  std::vector<CommandInput> out;
  for (const Task& task : tasks) {
    const TaskSpec& spec = task.spec;
    out.push_back({spec.file, fmt::format("the task file of task '{}'", spec.name)});
    out.push_back({spec.items, fmt::format("the items file of task '{}'", spec.name)});
    out.push_back({spec.fewshot_file, fmt::format("the few-shot file of task '{}'", spec.name)});
  }
  return out;
}

void prepare_output_file(const std::string& path, const std::string& db, const std::string& option,
                         const std::vector<CommandInput>& reads) {
  if (path.empty()) return;
  check_output_path(path, db, option, OutputKind::kFile, reads);
  ensure_parent_dir(path);
}

}  // namespace kiln
