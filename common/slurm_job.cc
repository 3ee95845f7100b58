#include "common/slurm_job.h"

#include <optional>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace trl {
namespace {

// Splits at commas outside brackets.
absl::StatusOr<std::vector<std::string>> TopLevelEntries(
    const std::string& list) {
  std::vector<std::string> entries;
  std::string current;
  int depth = 0;
  for (char c : list) {
    if (c == '[') ++depth;
    if (c == ']' && --depth < 0) break;
    if (c == ',' && depth == 0) {
      entries.push_back(current);
      current.clear();
    } else {
      current.push_back(c);
    }
  }
  if (depth != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("unbalanced brackets in host list '", list, "'"));
  }
  entries.push_back(current);
  return entries;
}

// "01-03,07" -> 01 02 03 07
absl::StatusOr<std::vector<std::string>> ExpandRanges(const std::string& ranges,
                                                      const std::string& list) {
  std::vector<std::string> out;
  for (const std::string& part :
       std::vector<std::string>(absl::StrSplit(ranges, ','))) {
    const std::vector<std::string> ends = absl::StrSplit(part, '-');
    int64_t first = 0, last = 0;
    const bool ok =
        (ends.size() == 1 || ends.size() == 2) && !ends[0].empty() &&
        absl::SimpleAtoi(ends[0], &first) &&
        absl::SimpleAtoi(ends.back(), &last) && first >= 0 && last >= first &&
        last - first < 100000 &&
        ends[0].find_first_not_of("0123456789") == std::string::npos &&
        ends.back().find_first_not_of("0123456789") == std::string::npos;
    if (!ok) {
      return absl::InvalidArgumentError(
          absl::StrCat("bad range '", part, "' in host list '", list, "'"));
    }
    const size_t width = ends[0].size();
    for (int64_t n = first; n <= last; ++n) {
      std::string number = std::to_string(n);
      if (number.size() < width) {
        number.insert(0, width - number.size(), '0');
      }
      out.push_back(number);
    }
  }
  return out;
}

absl::StatusOr<std::vector<std::string>> ExpandEntry(const std::string& entry,
                                                     const std::string& list) {
  std::vector<std::string> names = {""};
  size_t at = 0;
  while (at < entry.size()) {
    const size_t open = entry.find('[', at);
    const std::string text = entry.substr(at, open - at);
    for (auto& name : names) name += text;
    if (open == std::string::npos) break;
    const size_t close = entry.find(']', open);
    if (close == std::string::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("unbalanced brackets in host list '", list, "'"));
    }
    auto numbers = ExpandRanges(entry.substr(open + 1, close - open - 1), list);
    if (!numbers.ok()) return numbers.status();
    std::vector<std::string> product;
    for (const auto& name : names) {
      for (const auto& number : *numbers) product.push_back(name + number);
    }
    names = std::move(product);
    at = close + 1;
  }
  return names;
}

std::optional<std::string> Get(const std::map<std::string, std::string>& env,
                               const std::string& name) {
  auto found = env.find(name);
  if (found == env.end() || found->second.empty()) return std::nullopt;
  return found->second;
}

absl::StatusOr<int> RequiredInt(const std::map<std::string, std::string>& env,
                                const std::string& name, int min) {
  auto text = Get(env, name);
  if (!text) {
    return absl::NotFoundError(absl::StrCat(
        name,
        " is not set (--slurm reads the variables srun gives a task; "
        "run trl-launch under srun)"));
  }
  int value = 0;
  if (!absl::SimpleAtoi(*text, &value) || value < min) {
    return absl::InvalidArgumentError(absl::StrCat(
        name, "='", *text, "' is not an integer of at least ", min));
  }
  return value;
}

// "4", "a100:4", "gpu:a100:4" -> 4; "0,1,2" (a list of ids) -> 3.
int CountGpus(const std::string& text, bool is_id_list) {
  if (is_id_list) {
    return static_cast<int>(
        std::vector<std::string>(absl::StrSplit(text, ',', absl::SkipEmpty()))
            .size());
  }
  int total = 0;
  for (const std::string& part :
       std::vector<std::string>(absl::StrSplit(text, ','))) {
    const size_t colon = part.rfind(':');
    int count = 0;
    if (absl::SimpleAtoi(
            colon == std::string::npos ? part : part.substr(colon + 1),
            &count)) {
      total += count;
    }
  }
  return total;
}

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandSlurmHostList(
    const std::string& list) {
  if (list.empty()) return absl::InvalidArgumentError("empty host list");
  auto entries = TopLevelEntries(list);
  if (!entries.ok()) return entries.status();
  std::vector<std::string> hosts;
  for (const auto& entry : *entries) {
    if (entry.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("empty entry in host list '", list, "'"));
    }
    auto names = ExpandEntry(entry, list);
    if (!names.ok()) return names.status();
    hosts.insert(hosts.end(), names->begin(), names->end());
  }
  return hosts;
}

absl::StatusOr<SlurmJob> ReadSlurmJob(
    const std::map<std::string, std::string>& env) {
  SlurmJob job;
  auto rank = RequiredInt(env, "SLURM_NODEID", 0);
  if (!rank.ok()) return rank.status();
  auto machines = Get(env, "SLURM_JOB_NUM_NODES")
                      ? RequiredInt(env, "SLURM_JOB_NUM_NODES", 1)
                      : RequiredInt(env, "SLURM_NNODES", 1);
  if (!machines.ok()) {
    if (absl::IsNotFound(machines.status())) {
      return absl::NotFoundError(
          "SLURM_JOB_NUM_NODES is not set (--slurm reads the variables srun "
          "gives a task; run trl-launch under srun)");
    }
    return machines.status();
  }
  job.machine_rank = *rank;
  job.num_machines = *machines;
  auto list = Get(env, "SLURM_JOB_NODELIST");
  if (!list) list = Get(env, "SLURM_NODELIST");
  if (!list) {
    return absl::NotFoundError(
        "SLURM_JOB_NODELIST is not set (--slurm reads the variables srun "
        "gives a task; run trl-launch under srun)");
  }
  auto hosts = ExpandSlurmHostList(*list);
  if (!hosts.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("SLURM_JOB_NODELIST: ", hosts.status().message()));
  }
  job.hosts = *hosts;
  if (static_cast<int>(job.hosts.size()) != job.num_machines) {
    return absl::InvalidArgumentError(absl::StrCat(
        "SLURM_JOB_NODELIST='", *list, "' names ", job.hosts.size(),
        " hosts but SLURM_JOB_NUM_NODES is ", job.num_machines));
  }
  if (job.machine_rank >= job.num_machines) {
    return absl::InvalidArgumentError(
        absl::StrCat("SLURM_NODEID=", job.machine_rank,
                     " is not below SLURM_JOB_NUM_NODES=", job.num_machines));
  }
  job.main_process_ip = job.hosts.front();
  if (auto gpus = Get(env, "SLURM_GPUS_ON_NODE")) {
    job.gpus_per_node = CountGpus(*gpus, false);
  } else if (auto per_node = Get(env, "SLURM_GPUS_PER_NODE")) {
    job.gpus_per_node = CountGpus(*per_node, false);
  } else if (auto ids = Get(env, "SLURM_JOB_GPUS")) {
    job.gpus_per_node = CountGpus(*ids, true);
  }
  return job;
}

void ApplySlurmJob(const SlurmJob& job, AccelerateConfig* config,
                   std::vector<std::string>* notes) {
  auto note = [&](const std::string& key, const std::string& before,
                  const std::string& after, const std::string& from) {
    if (before != after && notes != nullptr) {
      notes->push_back(absl::StrCat("Slurm sets ", key, " to ", after,
                                    " (from ", from, "; it was ", before, ")"));
    }
  };
  // Processes per node before Slurm changes the machine count.
  const int per_node_before =
      config->num_processes > 0 && config->num_machines > 0
          ? config->num_processes / config->num_machines
          : -1;
  note("machine_rank", std::to_string(config->machine_rank),
       std::to_string(job.machine_rank), "SLURM_NODEID");
  config->machine_rank = job.machine_rank;
  note("num_machines", std::to_string(config->num_machines),
       std::to_string(job.num_machines), "SLURM_JOB_NUM_NODES");
  config->num_machines = job.num_machines;
  note("main_process_ip",
       config->main_process_ip.empty() ? "unset" : config->main_process_ip,
       job.main_process_ip, "the first host of SLURM_JOB_NODELIST");
  config->main_process_ip = job.main_process_ip;
  const int per_node = job.gpus_per_node > 0 && !config->use_cpu
                           ? job.gpus_per_node
                           : per_node_before;
  if (per_node > 0) {
    const int total = per_node * job.num_machines;
    note("num_processes", std::to_string(config->num_processes),
         std::to_string(total),
         job.gpus_per_node > 0 && !config->use_cpu
             ? absl::StrCat(job.gpus_per_node, " GPUs per node")
             : absl::StrCat(per_node, " per node x ", job.num_machines,
                            " nodes"));
    config->num_processes = total;
  }
}

}  // namespace trl
