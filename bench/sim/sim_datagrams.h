// One UDP socket for the heartbeat datagrams of every simulated agent in
// the process: a socket each, as real agents have, would take a second
// descriptor per agent, and the process's limit (20,000 here, not
// raisable) would cap a run at 9,000 agents. Each agent keeps its own
// HeartbeatSequence (the real agent's signing and ack rules); acks are read
// here and handed to the agent whose machine rank they name.
#ifndef TRL_BENCH_SIM_SIM_DATAGRAMS_H_
#define TRL_BENCH_SIM_SIM_DATAGRAMS_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>

namespace trl::sim {

class SimDatagrams {
 public:
  // `host`: the coordinator's numeric address.
  explicit SimDatagrams(std::string host) : host_(std::move(host)) {}
  ~SimDatagrams();
  SimDatagrams(const SimDatagrams&) = delete;
  SimDatagrams& operator=(const SimDatagrams&) = delete;

  // Opens the socket towards `port` once (every agent is told the same
  // port); false if it cannot be opened or a different port is asked for.
  bool OpenTowards(int port);
  bool Send(std::string_view bytes);
  // Reads every datagram waiting, without blocking, and hands each to
  // `deliver` with the machine rank it names.
  void Drain(const std::function<void(uint32_t machine_rank, std::string_view)>&
                 deliver);

 private:
  const std::string host_;
  std::mutex mutex_;
  int port_ = 0;  // guarded by mutex_
  int fd_ = -1;   // set once, under mutex_
};

}  // namespace trl::sim

#endif  // TRL_BENCH_SIM_SIM_DATAGRAMS_H_
