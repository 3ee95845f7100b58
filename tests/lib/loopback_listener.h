// A real TCP socket listening on 127.0.0.1 at a port the kernel picked, for
// the tests that need one (a probe, a connection to count or to cut).
#ifndef TRL_TESTS_LIB_LOOPBACK_LISTENER_H_
#define TRL_TESTS_LIB_LOOPBACK_LISTENER_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace trl {

class LoopbackListener {
 public:
  explicit LoopbackListener(int backlog) {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    address_.sin_family = AF_INET;
    address_.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t length = sizeof(address_);
    if (fd_ < 0 || bind(fd_, get(), sizeof(address_)) != 0 ||
        listen(fd_, backlog) != 0 ||
        getsockname(fd_, reinterpret_cast<sockaddr*>(&address_), &length) !=
            0) {
      Close();
    }
  }
  ~LoopbackListener() { Close(); }
  LoopbackListener(const LoopbackListener&) = delete;
  LoopbackListener& operator=(const LoopbackListener&) = delete;

  // False if it could not be made.
  bool ok() const { return fd_ >= 0; }
  int fd() const { return fd_; }
  int port() const { return ntohs(address_.sin_port); }
  // Its address, for connect(2).
  const sockaddr* get() const {
    return reinterpret_cast<const sockaddr*>(&address_);
  }
  socklen_t length() const { return sizeof(address_); }
  // Nothing listens at port() any more.
  void Close() {
    if (fd_ >= 0) close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
  sockaddr_in address_ = {};
};

}  // namespace trl

#endif  // TRL_TESTS_LIB_LOOPBACK_LISTENER_H_
