#include "coordinator/owner/generation_preparer.h"

#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "coordinator/owner/generation_assignment.h"

namespace trl {

namespace pb = trl::launch::v1;

GenerationPreparer::GenerationPreparer(
    const CoordinatorOptions& options, RendezvousSource rendezvous, Clock clock,
    JobStateMachine& machine, const AgentTable& agents, JobRecordKeeper& record,
    DecisionJournal& journal, Offload offload, Execute execute)
    : options_(options),
      rendezvous_(std::move(rendezvous)),
      clock_(std::move(clock)),
      machine_(machine),
      agents_(agents),
      record_(record),
      journal_(journal),
      offload_(std::move(offload)),
      execute_(std::move(execute)) {}

void GenerationPreparer::Prepare() {
  if (preparing_generation_) return;  // one preparation at a time
  preparing_generation_ = true;
  // Slow, so off the owner's thread: the rendezvous (the NCCL id helper,
  // a free port) and keeping the generation number before anything of it
  // exists: a coordinator restarted later must never hand out a number
  // that workers have seen, so a generation that cannot be kept does not
  // start.
  auto prepared = std::make_shared<PreparedGeneration>();
  prepared->generation = machine_.generation() + 1;
  prepared->master_addr = machine_.NextMasterAddr();
  std::optional<JobRecord> record;
  if (record_.keeps()) {
    record = record_.RecordOf(machine_, prepared->generation);
    prepared->hosts = record->hosts;
  }
  offload_(
      [prepared, record = std::move(record), rendezvous = rendezvous_,
       path = record_.path()] {
        prepared->rendezvous = rendezvous(prepared->master_addr);
        if (prepared->rendezvous.ok() && record) {
          prepared->kept = SaveJobRecord(path, *record);
        }
      },
      [this, prepared] {
        preparing_generation_ = false;
        StartPreparedGeneration(*prepared);
      });
}

void GenerationPreparer::StartPreparedGeneration(
    const PreparedGeneration& prepared) {
  const TimePoint now = clock_();
  // Meanwhile the job may have stopped, lost a machine, or machine 0 come
  // back from another address (or, in an elastic job, another machine
  // become the first member): prepared for a state that is gone, the
  // generation does not start, and the next tick prepares again.
  if (!machine_.ReadyToStart(now) ||
      machine_.generation() + 1 != prepared.generation ||
      machine_.NextMasterAddr() != prepared.master_addr ||
      (record_.keeps() && !SameHosts(prepared.hosts))) {
    execute_(machine_.Tick(now));
    return;
  }
  const auto& rendezvous = prepared.rendezvous;
  if (!rendezvous.ok()) {
    execute_(
        machine_.StopRequested(absl::StrCat("cannot prepare the rendezvous: ",
                                            rendezvous.status().message()),
                               1, now));
    return;
  }
  if (!prepared.kept.ok()) {
    const int64_t next = prepared.generation;
    execute_(machine_.StopRequested(
        absl::StrCat("cannot keep the job's state, so generation ", next,
                     " does not start (a restarted coordinator would not "
                     "know of it): ",
                     prepared.kept.message()),
        1, now));
    return;
  }
  record_.Kept(machine_);
  const GenerationStart start = machine_.StartGeneration(clock_());
  // Made first: it opens the generation's store namespace.
  GenerationAssignment assignment(options_, start, *rendezvous,
                                  machine_.settings().Elastic());
  journal_.TellGenerationStarted(start, rendezvous->master_port,
                                 options_.policy.restart.max_restarts);
  std::map<int, std::vector<AgentLink*>> links_of_machine;
  for (const auto& [link, key] : agents_.registered()) {
    links_of_machine[key].push_back(link);
  }
  for (const auto& node : start.nodes) {
    const pb::CoordinatorMessage& message = assignment.For(node);
    for (AgentLink* link : links_of_machine[node.machine_rank]) {
      link->Send(message);
    }
  }
}

bool GenerationPreparer::SameHosts(
    const std::map<int, HostIdentity>& hosts) const {
  if (hosts.size() != machine_.nodes().size()) return false;
  for (const auto& [m, node] : machine_.nodes()) {
    auto kept = hosts.find(m);
    if (kept == hosts.end() || kept->second.hostname != node.info.hostname ||
        kept->second.host_id != node.info.host_id) {
      return false;
    }
  }
  return true;
}

}  // namespace trl
