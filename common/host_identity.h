// Which running kernel and process namespace this process is in: the
// kernel's boot id (a fresh random UUID at every boot, different on every
// machine) and the inode of its pid namespace. Two agents with the same id
// see the same processes, so a new agent can find and kill what an earlier
// one left; a hostname alone does not say that (cloned machines,
// containers with one name).
#ifndef TRL_COMMON_HOST_IDENTITY_H_
#define TRL_COMMON_HOST_IDENTITY_H_

#include <string>

namespace trl {

// "BOOT_ID/pidns:INODE", or "" when /proc does not say (then the process
// is never taken for being on the same host as another).
std::string LocalHostId();

}  // namespace trl

#endif  // TRL_COMMON_HOST_IDENTITY_H_
