// trl-nccl-root: creates one NCCL unique id and keeps its bootstrap root
// alive for one generation.
//
// ncclGetUniqueId starts a root thread and a listening socket in the calling
// process that live until every rank has connected, which a failed
// generation never does. Doing it here instead of in the coordinator keeps
// the coordinator free of a leaked thread and socket per generation: this
// process prints the id (hex) and exits when its stdin closes, which the
// coordinator does when the generation ends (or by dying).
#include <nccl.h>
#include <unistd.h>

#include <cstdio>

int main() {
  ncclUniqueId id;
  const ncclResult_t result = ncclGetUniqueId(&id);
  if (result != ncclSuccess) {
    std::fprintf(stderr, "trl-nccl-root: ncclGetUniqueId failed: %s\n",
                 ncclGetErrorString(result));
    return 1;
  }
  for (unsigned char byte : id.internal) std::printf("%02x", byte);
  std::printf("\n");
  std::fflush(stdout);
  char buffer[64];
  while (read(STDIN_FILENO, buffer, sizeof(buffer)) > 0) {
  }
  return 0;
}
