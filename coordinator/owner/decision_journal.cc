#include "coordinator/owner/decision_journal.h"

#include <algorithm>
#include <map>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/logging.h"
#include "common/where_ranks_stand.h"
#include "coordinator/job/elastic_membership.h"

namespace trl {

namespace pb = trl::launch::v1;

namespace {

std::shared_ptr<spdlog::logger> Log() { return ComponentLogger("coord"); }

}  // namespace

DecisionJournal::DecisionJournal(const JobStateMachine& machine,
                                 const std::string& state_file, bool resume,
                                 WallClock wall_clock)
    : machine_(machine),
      wall_clock_(std::move(wall_clock)),
      events_(JobEventLog::PathFor(state_file), resume) {}

void DecisionJournal::Note(const char* kind, int machine_rank,
                           std::string text) {
  pb::JobEvent event;
  event.set_generation(machine_.generation());
  event.set_kind(kind);
  event.set_machine_rank(machine_rank);
  event.set_text(std::move(text));
  event.set_unix_ms(wall_clock_());
  // Registrations come in storms: written with the next tick.
  const bool deferred =
      event.kind() == "registered" || event.kind() == "rejoined";
  events_.Append(std::move(event), deferred);
}

void DecisionJournal::TellRefused(const std::string& peer,
                                  const AgentInfo& info,
                                  const absl::Status& status) {
  Log()->warn("refused the agent at {} ({}, host {}): {}", peer,
              info.spare ? std::string("a spare")
                         : absl::StrCat("machine_rank ", info.machine_rank),
              info.hostname, std::string(status.message()));
}

void DecisionJournal::TellRegistered(const AgentInfo& info, bool spare,
                                     bool rejoin, TimePoint now) {
  if (spare) {
    const std::string was = info.spare
                                ? ""
                                : absl::StrCat(" (machine ", info.machine_rank,
                                               "'s place is taken by a spare)");
    Log()->info(
        "a spare registered: host {}, address {}, {} workers{}; {} "
        "spare(s)",
        info.hostname, info.advertise_addr, info.local_world_size, was,
        machine_.spares().size());
    Note("spare", -1,
         absl::StrCat("a spare registered: host ", info.hostname, ", address ",
                      info.advertise_addr, was));
    return;
  }
  Log()->info(
      "machine {} registered: host {}, address {} ({}), {} workers; "
      "{}/{} machines",
      info.machine_rank, info.hostname, info.advertise_addr,
      info.interface_name, info.local_world_size, machine_.nodes().size(),
      machine_.settings().num_machines);
  Note(rejoin ? "rejoined" : "registered", info.machine_rank,
       absl::StrCat("host ", info.hostname, ", address ", info.advertise_addr,
                    ", ", info.local_world_size, " workers"));
  const TimePoint old_may_run =
      machine_.nodes().at(info.machine_rank).old_agent_may_run_until;
  if (old_may_run > now) {
    Log()->warn(
        "machine {} is taken over by another agent (host {}, pid {}): its "
        "ranks are handed over in {:.1f} s, once the old agent's lease and "
        "stop grace have surely run out",
        info.machine_rank, info.hostname, info.agent_pid,
        std::chrono::duration<double>(old_may_run - now).count());
  }
}

void DecisionJournal::TellHandover(const Handover& handover) {
  Log()->warn("{}", handover.reason);
  Note(handover.to < 0 ? "spare_demoted" : "spare_promoted",
       std::max(handover.to, handover.from), handover.reason);
}

void DecisionJournal::TellDroppedDatagram(const char* why) {
  if (told_of_dropped_datagram_) return;
  Log()->warn(
      "dropped a heartbeat datagram ({}); later ones are "
      "dropped without a word",
      why);
  told_of_dropped_datagram_ = true;
}

void DecisionJournal::TellStalls() {
  const auto stalled = machine_.own_stalls() - stalls_told_;
  if (stalled <= std::chrono::steady_clock::duration::zero()) return;
  stalls_told_ = machine_.own_stalls();
  Log()->warn(
      "the coordinator did not run for {:.1f} s (frozen or starved); the "
      "agents' silence meanwhile is not held against them",
      std::chrono::duration<double>(stalled).count());
  Note("stalled", -1,
       absl::StrFormat("the coordinator did not run for %.1f s",
                       std::chrono::duration<double>(stalled).count()));
}

void DecisionJournal::TellLost(int machine) {
  if (auto node = machine_.nodes().find(machine);
      node != machine_.nodes().end()) {
    Note("lost", machine, node->second.lost_reason);
  }
}

void DecisionJournal::TellAgentGone(int machine) {
  Note("agent_gone", machine,
       "its agent died and every worker it started has ended (its "
       "guardian's word): its ranks need not wait out its lease");
}

void DecisionJournal::TellNewCordons() {
  const auto& cordoned = machine_.cordoned();
  for (const auto& [host, cordon] : cordoned) {
    if (!cordons_told_.insert(host).second) continue;
    Log()->warn(
        "host {} is cordoned ({}): it gets no ranks until {}`trl-coord "
        "uncordon {}`",
        host, cordon.Why(),
        cordon.ForFailures() ? "" : "its health checks pass or ", host);
    Note("cordoned", -1, absl::StrCat("host ", host, ": ", cordon.Why()));
  }
  // Health cordons end by themselves.
  if (cordons_told_.size() == cordoned.size()) return;
  for (auto it = cordons_told_.begin(); it != cordons_told_.end();) {
    if (cordoned.count(*it)) {
      ++it;
      continue;
    }
    Log()->info("host {} passes its health checks again: it may be given ranks",
                *it);
    Note("healthy", -1,
         absl::StrCat("host ", *it, " passes its health checks again"));
    it = cordons_told_.erase(it);
  }
}

void DecisionJournal::TellHealth(int key, const std::string& host,
                                 const std::string& problem) {
  const std::string who =
      key < 0 ? absl::StrCat("the spare on host ", host)
              : absl::StrCat("machine ", key, " (host ", host, ")");
  if (problem.empty()) {
    Log()->info("{} passes its health checks again", who);
    return;
  }
  Log()->error("{} is unhealthy: {}", who, problem);
  Note("unhealthy", key, absl::StrCat(who, ": ", problem));
}

void DecisionJournal::TellUncordoned(const std::string& host) {
  Log()->info("host {} is uncordoned: it may be given ranks again", host);
  cordons_told_.erase(host);
  Note("uncordoned", -1, absl::StrCat("host ", host, " is uncordoned"));
}

void DecisionJournal::TellStopping(const std::string& reason) {
  Log()->warn("stopping generation {}: {}", machine_.generation(), reason);
  Note("stopping", -1, reason);
}

void DecisionJournal::TellWhereRanksStood() {
  std::vector<std::pair<int, std::string>> where;
  for (const RankRecord& rank : machine_.ranks()) {
    if (!rank.exit.where.empty())
      where.emplace_back(rank.rank, rank.exit.where);
  }
  if (where.empty()) return;
  // A rank alone in its place is named with its machine in a job of
  // several: where to look for it.
  std::map<int, int> machine_of;
  std::set<int> machines;
  for (const RankRecord& rank : machine_.ranks()) {
    machine_of[rank.rank] = rank.machine_rank;
    machines.insert(rank.machine_rank);
  }
  const auto runs_on = [&](int rank) -> std::string {
    auto m = machine_of.find(rank);
    if (m == machine_of.end()) return "";
    auto node = machine_.nodes().find(m->second);
    return absl::StrCat(
        "on machine ", m->second,
        node == machine_.nodes().end()
            ? ""
            : absl::StrCat(" (host ", node->second.info.hostname, ")"));
  };
  const std::string grouped = machines.size() > 1
                                  ? WhereRanksStand(where, runs_on)
                                  : WhereRanksStand(where);
  Log()->warn("generation {}: where its ranks stood when it was stopped: {}",
              machine_.generation(), grouped);
  Note("stood", -1, grouped);
}

void DecisionJournal::TellFinished(const JobOutcome& outcome) {
  Note("finished", -1,
       absl::StrCat(JobPhaseName(outcome.phase), " (exit code ",
                    outcome.exit_code, "): ", outcome.summary));
}

void DecisionJournal::TellGenerationStarted(const GenerationStart& start,
                                            int master_port, int max_restarts) {
  Log()->info(
      "generation {}: world size {}, MASTER_ADDR={} MASTER_PORT={}, restarts "
      "used {} of {}",
      start.generation, start.world_size, start.master_addr, master_port,
      machine_.restarts_used(), max_restarts);
  for (int m : start.cordoned_members) {
    const std::string& host = machine_.nodes().at(m).info.hostname;
    Log()->warn(
        "generation {}: machine {} runs on cordoned host {}: no spare took its "
        "place and the job cannot start without it",
        start.generation, m, host);
  }
  const bool elastic = machine_.settings().Elastic();
  const std::string shape =
      elastic ? ElasticShape(start, machine_.settings()) : "";
  if (elastic) Log()->info("generation {}: {}", start.generation, shape);
  Note("generation", -1,
       absl::StrCat(
           elastic ? shape : absl::StrCat("world size ", start.world_size),
           ", restarts used ", machine_.restarts_used(), " of ", max_restarts));
}

}  // namespace trl
