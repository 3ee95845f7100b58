// What a daemon (trl-coord, trl-agent) does to itself at start, so that
// the workers it runs (user code) and other local users cannot take what
// it holds, and a flood of connections does not run it out of
// descriptors.
#ifndef TRL_COMMON_DAEMON_PROCESS_H_
#define TRL_COMMON_DAEMON_PROCESS_H_

#include <sys/resource.h>

namespace trl {

// Non-dumpable (its /proc/PID/environ and mem are closed to processes of
// the same user, workers included, and it cannot be ptraced by them), and
// the soft descriptor limit raised to the hard one. Call first in main.
void PrepareDaemonProcess();

// The descriptor limit the daemon started with, which workers get back
// before execve (they see the limits they would see without us).
rlimit OriginalOpenFileLimit();

// Overwrites TRL_AUTH_TOKEN's value in this process's environment block
// (what /proc/PID/environ shows) and unsets it. Call once the token is read.
void ForgetTokenFromEnvironment();

}  // namespace trl

#endif  // TRL_COMMON_DAEMON_PROCESS_H_
