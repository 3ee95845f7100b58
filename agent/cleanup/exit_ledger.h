// The exits of a machine's workers, kept on disk so that they outlive the
// agent that started them. A worker's exit status goes to its parent, the
// agent; an agent frozen (SIGSTOP) while its workers exit, then killed,
// takes their statuses with it, and a job whose every rank exited 0 would
// be reported failed ("came back without the outcome of every worker").
//
// The agent writes one file per worker when a generation starts (the
// job's run id, generation, local rank, pid and start time) and one per exit it
// will report (what AgentCore keeps for the next registration). Its guardian
// (job_guardian.h), a process a SIGSTOP of the agent does not stop, reads
// the exit status of a worker the agent has not reaped from /proc (a
// zombie's exit_code) and writes the same exit file. A new agent of the
// same machine for the same coordinator on the same host (pid namespace
// and boot, common/host_identity.h) reads them and registers with them, as
// a thawed agent does with the exits it kept in memory.
//
// Only a worker's own end is written: once the agent began to stop a
// generation (it writes that first), the guardian writes nothing more of
// it (a worker that exits 0 on SIGTERM did not finish), and a SIGKILL is
// never taken for a worker's own end (the guardian's fence sends it).
//
// Files live under $TMPDIR (else /tmp)/trl-launch-<uid>/exits/
// <coordinator>.m<machine>.<host>/ (mode 0700, ours, checked), on the
// machine itself (not in a home directory that NFS may share); they are
// written through a temp file renamed into place, not synced (they need to
// outlive a process, not the machine).
#ifndef TRL_AGENT_CLEANUP_EXIT_LEDGER_H_
#define TRL_AGENT_CLEANUP_EXIT_LEDGER_H_

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"

namespace trl {

struct LedgerStart {
  std::string run_id;  // the job's run (Assignment.run_id)
  int64_t generation = -1;
  int local_rank = -1;
  pid_t pid = 0;
  unsigned long long start_time = 0;  // /proc/PID/stat, clock ticks
};

struct LedgerExit {
  int exit_code = 0;
  int signal = 0;
};

// What a new agent carries to its registration: the exits of one
// generation of one run of a job (those that were written).
struct LedgerReport {
  std::string run_id;
  int64_t generation = -1;
  std::map<int, LedgerExit> exits;  // local rank -> exit
};

// --- The pure parts ------------------------------------------------------

// The directory name of one machine of one coordinator on one host: the
// coordinator's address with anything but [A-Za-z0-9.-] as '_', the
// machine rank, and a hash of the host id.
std::string LedgerDirName(absl::string_view coordinator, int machine_rank,
                          absl::string_view host_id);

std::string FormatStart(const LedgerStart& start);
std::optional<LedgerStart> ParseStart(absl::string_view text);
std::string FormatExit(const LedgerExit& exit);
std::optional<LedgerExit> ParseExit(absl::string_view text);

// A worker's own end from a waitpid(2) status: nullopt for a SIGKILL (a
// fence's, or the agent's) or a status that is not an end.
std::optional<LedgerExit> OwnEndFromWaitStatus(int status);

// The newest generation's exits among `starts` (of its run), with the
// exit of each start that has one.
LedgerReport ChooseReport(
    const std::vector<std::pair<LedgerStart, std::optional<LedgerExit>>>&
        entries);

// --- On disk -------------------------------------------------------------

// $TMPDIR (else /tmp)/trl-launch-<uid>/exits; made (each level 0700 and
// checked to be ours alone, else nothing is kept) only when a generation
// starts.
std::string DefaultLedgerRoot();

class ExitLedger {
 public:
  // A ledger with an empty root keeps nothing.
  ExitLedger(std::string root, absl::string_view coordinator, int machine_rank,
             absl::string_view host_id);

  // A generation starts: what was kept of earlier ones is dropped, and each
  // worker's start is written (start times read from /proc now). The
  // directories are made here, each checked to be ours alone.
  void BeginGeneration(const std::string& run_id, int64_t generation,
                       const std::vector<std::pair<int, pid_t>>& workers) const;
  // The agent is about to signal the workers of `generation`.
  void StoppingGeneration(int64_t generation) const;
  // A worker's exit that the agent will report.
  void RecordExit(int64_t generation, int local_rank,
                  const LedgerExit& exit) const;
  // What an earlier agent kept; empty when nothing.
  LedgerReport Read() const;
  // Drops everything.
  void Clear() const;
  // The agent ends in order: drops everything, and the directories above
  // if no other ledger is left there (nothing stays in a shared /tmp).
  void RemoveIfUnused() const;

  const std::string& dir() const { return dir_; }

 private:
  std::string root_;
  std::string dir_;  // "" when nothing is kept
};

// For the guardian: the workers the ledgers of this host (under `root`)
// started, watched for an end their parent has not reaped.
// Whether this kernel is Linux 5.17 or later (LedgerWatch).
bool KernelShowsProcessExitCode();

class LedgerWatch {
 public:
  // `kernel_shows_process_exit_code`: whether /proc/PID/stat's exit_code
  // of a zombie whose every thread has ended is the process's status
  // (Linux 5.17 and later; KernelShowsProcessExitCode). Before, it is the
  // leader's own, which differs when the leader ended alone first.
  LedgerWatch(
      std::string root, std::string host_id,
      bool kernel_shows_process_exit_code = KernelShowsProcessExitCode());

  // Writes the exit of each worker of `parent` that is now a zombie, unless
  // it is no own end or its generation was being stopped (read after the
  // end was seen: a stop written later came after it). Ledgers are read
  // again only when their directory changed. Returns how many it wrote.
  int KeepEndsOfZombiesOf(pid_t parent);

 private:
  struct Watched {
    std::string dir;
    std::vector<LedgerStart> starts;
    int64_t changed_ns = -1;  // the directory's mtime when read
  };
  std::string root_;
  std::string host_suffix_;
  bool kernel_shows_process_exit_code_;
  std::map<std::string, Watched> ledgers_;       // by directory name
  std::map<pid_t, unsigned long long> written_;  // pid -> start time
  // Zombie leaders seen with threads left, all ending (pid -> start time).
  std::map<pid_t, unsigned long long> seen_ending_;
};

// Removes the ledgers under `root` that nothing wrote to for `age`.
int PruneLedgers(const std::string& root, std::chrono::hours age);

}  // namespace trl

#endif  // TRL_AGENT_CLEANUP_EXIT_LEDGER_H_
