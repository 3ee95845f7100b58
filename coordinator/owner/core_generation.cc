// A generation's start (owner/core.h): prepared off the owner's
// thread (the rendezvous, keeping its number in the state file), then
// started on it if the job is still ready for it, with an assignment to
// each member machine's agent.
#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/worker_environment.h"
#include "coordinator/owner/core.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

std::shared_ptr<spdlog::logger> Log() { return ComponentLogger("coord"); }

}  // namespace

void CoordinatorCore::StartGeneration() {
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
  OffloadWork(
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

void CoordinatorCore::StartPreparedGeneration(
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
    Execute(machine_.Tick(now));
    return;
  }
  const auto& rendezvous = prepared.rendezvous;
  if (!rendezvous.ok()) {
    Execute(
        machine_.StopRequested(absl::StrCat("cannot prepare the rendezvous: ",
                                            rendezvous.status().message()),
                               1, now));
    return;
  }
  if (!prepared.kept.ok()) {
    const int64_t next = prepared.generation;
    Execute(machine_.StopRequested(
        absl::StrCat("cannot keep the job's state, so generation ", next,
                     " does not start (a restarted coordinator would not "
                     "know of it): ",
                     prepared.kept.message()),
        1, now));
    return;
  }
  record_.Kept(machine_);
  const GenerationStart start = machine_.StartGeneration(clock_());
  JobEnvironmentInputs inputs;
  inputs.job_id = options_.job_id;
  inputs.generation = start.generation;
  inputs.world_size = start.world_size;
  inputs.num_machines = start.num_machines;
  inputs.max_restarts = options_.policy.restart.max_restarts;
  inputs.master_addr = start.master_addr;
  inputs.master_port = rendezvous->master_port;
  inputs.nccl_unique_id_hex = rendezvous->nccl_unique_id_hex;
  inputs.coordinator_address = options_.coordinator_address;
  if (options_.open_store_generation) {
    inputs.store_token =
        options_.open_store_generation(options_.job_id, start.generation);
  }
  const Environment job_env = BuildJobEnvironment(options_.config, inputs);
  journal_.TellGenerationStarted(start, rendezvous->master_port,
                                 options_.policy.restart.max_restarts);
  const bool elastic = machine_.settings().Elastic();

  pb::CoordinatorMessage message;
  pb::Assignment* assignment = message.mutable_assignment();
  assignment->set_job_id(options_.job_id);
  assignment->set_generation(start.generation);
  assignment->set_stop_grace_s(
      std::chrono::duration<double>(options_.policy.stop_grace).count());
  for (const auto& arg : options_.worker_argv) assignment->add_argv(arg);
  assignment->set_argv_runs_python(options_.worker_argv_runs_python);
  assignment->mutable_job_environment()->insert(job_env.begin(), job_env.end());
  std::map<int, std::vector<AgentLink*>> links_of_machine;
  for (const auto& [link, key] : agents_.registered()) {
    links_of_machine[key].push_back(link);
  }
  for (const auto& node : start.nodes) {
    assignment->set_machine_rank(node.machine_rank);
    assignment->set_rank_offset(node.rank_offset);
    assignment->set_local_world_size(node.local_world_size);
    if (elastic && job_env.count("WORLD_SIZE")) {
      // Its place among this generation's machines, which the agent puts
      // in GROUP_RANK (BuildWorkerEnvironment).
      (*assignment->mutable_job_environment())["GROUP_RANK"] =
          std::to_string(node.group_rank);
    }
    for (AgentLink* link : links_of_machine[node.machine_rank]) {
      link->Send(message);
    }
  }
}

bool CoordinatorCore::SameHosts(
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
