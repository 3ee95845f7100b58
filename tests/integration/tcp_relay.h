// A TCP relay on loopback for tests: it forwards between clients that
// connect to its port and a target port, and can be told to hold every
// byte (a silent link) or to cut every connection (a broken link) while the
// processes on both ends run on.
#ifndef TRL_TESTS_INTEGRATION_TCP_RELAY_H_
#define TRL_TESTS_INTEGRATION_TCP_RELAY_H_

#include <atomic>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace trl::testing {

class TcpRelay {
 public:
  explicit TcpRelay(int target_port);
  ~TcpRelay();
  TcpRelay(const TcpRelay&) = delete;
  TcpRelay& operator=(const TcpRelay&) = delete;

  int port() const { return port_; }
  // Holds every byte from now on (connections stay open).
  void Hold() { holding_ = true; }
  // Closes every connection, and forwards again for new ones.
  void CutAndResume();
  // Every byte forwarded so far, both directions (a packet capture of the
  // connections' payloads).
  std::string Captured() const;

 private:
  void Loop();

  const int target_port_;
  int listen_fd_ = -1;
  int port_ = 0;
  int wake_[2] = {-1, -1};
  std::atomic<bool> holding_{false};
  std::atomic<bool> cut_{false};
  std::atomic<bool> stop_{false};
  std::thread thread_;
  mutable std::mutex captured_mutex_;
  std::string captured_;
};

}  // namespace trl::testing

#endif  // TRL_TESTS_INTEGRATION_TCP_RELAY_H_
