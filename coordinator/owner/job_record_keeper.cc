#include "coordinator/owner/job_record_keeper.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "common/logging.h"

namespace trl {

namespace {

std::shared_ptr<spdlog::logger> Log() { return ComponentLogger("coord"); }

}  // namespace

JobRecordKeeper::JobRecordKeeper(std::string state_file, std::string job_id,
                                 std::string identity, Clock clock,
                                 WallClock wall_clock, Offload offload,
                                 std::string run_id)
    : path_(std::move(state_file)),
      job_id_(std::move(job_id)),
      run_id_(std::move(run_id)),
      identity_(std::move(identity)),
      clock_(std::move(clock)),
      wall_clock_(std::move(wall_clock)),
      offload_(std::move(offload)) {}

void JobRecordKeeper::Resume(const JobRecord& record,
                             std::chrono::milliseconds max_backoff,
                             JobStateMachine& machine) {
  // The rest of the backoff, from wall-clock time to the steady clock;
  // never more than the backoff's cap (a clock that jumped back).
  const auto rest = std::clamp(
      std::chrono::milliseconds(record.not_before_unix_ms - wall_clock_()),
      std::chrono::milliseconds(0), max_backoff);
  machine.ResumeAfter(record.generation, record.restarts_used, record.failures,
                      clock_() + rest, record.hosts, record.run_on);
  machine.RestoreCordons(record.cordoned);
  kept_restarts_ = record.restarts_used;
  kept_failures_ = record.failures.size();
}

JobRecord JobRecordKeeper::RecordOf(const JobStateMachine& machine,
                                    int64_t generation) const {
  JobRecord record;
  record.job_id = job_id_;
  record.run_id = run_id_;
  record.generation = generation;
  record.restarts_used = machine.restarts_used();
  record.identity = identity_;
  const TimePoint now = clock_();
  if (machine.next_start_not_before() > now) {
    record.not_before_unix_ms =
        wall_clock_() + std::chrono::duration_cast<std::chrono::milliseconds>(
                            machine.next_start_not_before() - now)
                            .count();
  }
  record.failures = machine.failures();
  for (const auto& [m, node] : machine.nodes()) {
    record.hosts[m] = node.info.host();
    record.run_on[m] = node.info.RunOn(machine.settings().stop_grace);
  }
  for (auto& failure : record.failures) failure.exit.last_lines.clear();
  record.cordoned = machine.cordoned();
  return record;
}

void JobRecordKeeper::KeepIfChanged(const JobStateMachine& machine) {
  if (machine.restarts_used() != kept_restarts_ ||
      machine.failures().size() != kept_failures_) {
    Keep(machine);
  }
}

void JobRecordKeeper::Keep(const JobStateMachine& machine) {
  if (!keeps() || IsFinished(machine.phase())) return;
  Write(RecordOf(machine, machine.generation()));
}

void JobRecordKeeper::Kept(const JobStateMachine& machine) {
  kept_restarts_ = machine.restarts_used();
  kept_failures_ = machine.failures().size();
}

void JobRecordKeeper::Write(JobRecord record) {
  // Noted as asked for at once: KeepIfChanged asks again only for a new
  // change (or after a failure, below).
  kept_restarts_ = record.restarts_used;
  kept_failures_ = record.failures.size();
  auto saved = std::make_shared<absl::Status>();
  offload_([saved, record = std::move(record),
            path = path_] { *saved = SaveJobRecord(path, record); },
           [this, saved] {
             if (saved->ok()) return;
             // A counted restart, its backoff and the failure history outlive
             // this process; the next change, or the next generation's start,
             // tries again (and that does not start without).
             Log()->warn("the job's state is not kept: {}",
                         std::string(saved->message()));
             kept_restarts_ = -1;
           });
}

void JobRecordKeeper::Remove() {
  if (!keeps()) return;
  // After every write asked for before: in order, on the same thread.
  offload_([path = path_] { RemoveJobRecord(path); }, [] {});
}

}  // namespace trl
