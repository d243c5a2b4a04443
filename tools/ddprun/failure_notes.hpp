// Where ranks that fail on their own say so, with the time: DDP_FAILURE_FILE (written by
// ddp/detail/common/failure_note.hpp), in a private folder of the round under $TMPDIR (else
// /tmp), removed when the round ends.
#pragma once

#include "first_failure.hpp"

#include <string>
#include <vector>

namespace ddprun {

class failure_notes {
public:
  /// Makes the round's folder (mode 0700). When neither $TMPDIR nor /tmp takes one, it warns and
  /// file() is empty: the job runs, and blame rests on exit times alone.
  failure_notes();
  failure_notes(const failure_notes&) = delete;
  failure_notes& operator=(const failure_notes&) = delete;

  /// What DDP_FAILURE_FILE names; empty when there is no folder.
  const std::string& file() const { return file_; }
  /// The notes written so far, "<unix ns> <rank> <reason>" each; unreadable lines are skipped.
  std::vector<failure> read() const;
  /// Removes the file and the folder.
  void remove() const;

private:
  std::string dir_, file_;
};

} // namespace ddprun
