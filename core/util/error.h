// Errors that reach the user. A UserError is a mistake the user can fix (bad config, missing
// data, unwritable path): the CLI prints its one line and exits 2, never a stack trace.
#pragma once

#include <stdexcept>
#include <string>

namespace kiln {

class UserError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A plugin's objection to one of its own parameters. The plugin knows the key; the assembler,
// which knows where the config set it, prefixes the file:line:col.
class ParamError : public UserError {
 public:
  ParamError(std::string key, const std::string& message)
      : UserError(message), key_(std::move(key)) {}
  const std::string& key() const { return key_; }

 private:
  std::string key_;
};

// Training met non-finite gradients with train.on_nonfinite = "abort": not a mistake in the
// input, but the message says what to change.
class DivergedError : public UserError {
 public:
  using UserError::UserError;
};

// Exit codes of the kiln command, documented in docs/experiments.md ("Exit codes").
constexpr int kExitOk = 0;
constexpr int kExitInternal = 1;       // a bug or an environment failure Kiln cannot explain
constexpr int kExitUsage = 2;          // a user mistake: the message says what and how to fix it
constexpr int kExitSomeFailed = 3;     // kiln sweep: some members did not complete
constexpr int kExitDiverged = 4;       // non-finite gradients and train.on_nonfinite = "abort"
constexpr int kExitInterrupted = 130;  // SIGINT/SIGTERM: snapshot taken, run marked interrupted

}  // namespace kiln
