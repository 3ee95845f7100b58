#include "worker/nccl_collectives.h"

#include <cuda_runtime.h>
#include <nccl.h>

#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"

namespace trl::worker {
namespace {

using Clock = std::chrono::steady_clock;

absl::Status CudaError(const char* what, cudaError_t error) {
  return absl::InternalError(
      absl::StrCat(what, ": ", cudaGetErrorString(error)));
}

absl::Status NcclError(const char* what, ncclResult_t result,
                       ncclComm_t comm = nullptr) {
  std::string detail = ncclGetErrorString(result);
  if (comm != nullptr) {
    if (const char* last = ncclGetLastError(comm); last && *last) {
      absl::StrAppend(&detail, " (", last, ")");
    }
  }
  return absl::UnavailableError(absl::StrCat(what, ": ", detail));
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return c - 'A' + 10;
}

// Polls a non-blocking communicator until its pending work is done, an
// error shows, or the deadline passes (then it is aborted).
absl::Status AwaitComm(ncclComm_t comm, Clock::time_point deadline,
                       const std::string& what) {
  while (true) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t polled = ncclCommGetAsyncError(comm, &state);
    if (polled != ncclSuccess) return NcclError(what.c_str(), polled, comm);
    if (state == ncclSuccess) return absl::OkStatus();
    if (state != ncclInProgress) return NcclError(what.c_str(), state, comm);
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat(what, " did not finish before the deadline"));
    }
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
}

class NcclCollectives : public Collectives {
 public:
  NcclCollectives(ncclComm_t comm, cudaStream_t stream, int rank, int size,
                  std::chrono::milliseconds timeout)
      : comm_(comm),
        stream_(stream),
        rank_(rank),
        size_(size),
        timeout_(timeout) {}

  ~NcclCollectives() override {
    if (aborted_) {
      ncclCommAbort(comm_);
    } else {
      ncclCommFinalize(comm_);
      AwaitComm(comm_, Clock::now() + timeout_, "finalising NCCL")
          .IgnoreError();
      ncclCommDestroy(comm_);
    }
    if (buffer_ != nullptr) cudaFree(buffer_);
    cudaStreamDestroy(stream_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  std::string name() const override { return "NCCL"; }

  absl::Status AllReduceSum(float* data, size_t count) override {
    return Run(data, count * sizeof(float), "NCCL all-reduce",
               [&](void* device) {
                 return ncclAllReduce(device, device, count, ncclFloat, ncclSum,
                                      comm_, stream_);
               });
  }

  absl::Status Broadcast(void* data, size_t bytes, int root) override {
    return Run(data, bytes, "NCCL broadcast", [&](void* device) {
      return ncclBroadcast(device, device, bytes, ncclChar, root, comm_,
                           stream_);
    });
  }

 private:
  // Copies `data` to the GPU, runs `collective` on it there, waits for it
  // with the deadline, and copies the result back.
  template <typename Collective>
  absl::Status Run(void* data, size_t bytes, const char* what,
                   Collective collective) {
    if (aborted_) return absl::FailedPreconditionError("NCCL was aborted");
    if (bytes > capacity_) {
      if (buffer_ != nullptr) cudaFree(buffer_);
      buffer_ = nullptr;
      if (cudaError_t e = cudaMalloc(&buffer_, bytes); e != cudaSuccess) {
        capacity_ = 0;
        return CudaError("cudaMalloc", e);
      }
      capacity_ = bytes;
    }
    if (cudaError_t e = cudaMemcpyAsync(buffer_, data, bytes,
                                        cudaMemcpyHostToDevice, stream_);
        e != cudaSuccess) {
      return CudaError("copy to the GPU", e);
    }
    const auto deadline = Clock::now() + timeout_;
    ncclResult_t launched = collective(buffer_);
    if (launched != ncclSuccess && launched != ncclInProgress) {
      return Abort(NcclError(what, launched, comm_));
    }
    if (absl::Status s = AwaitComm(comm_, deadline, what); !s.ok()) {
      return Abort(s);
    }
    if (cudaError_t e = cudaMemcpyAsync(data, buffer_, bytes,
                                        cudaMemcpyDeviceToHost, stream_);
        e != cudaSuccess) {
      return CudaError("copy from the GPU", e);
    }
    // The stream finishes when every peer took part; a missing one would
    // keep it busy forever, so wait with the deadline.
    while (true) {
      const cudaError_t state = cudaStreamQuery(stream_);
      if (state == cudaSuccess) return absl::OkStatus();
      if (state != cudaErrorNotReady) return CudaError(what, state);
      if (absl::Status s = AwaitComm(comm_, deadline, what); !s.ok()) {
        return Abort(s);
      }
      if (Clock::now() >= deadline) {
        return Abort(absl::DeadlineExceededError(
            absl::StrCat(what, " did not complete within ", timeout_.count(),
                         " ms (a rank is missing or stuck)")));
      }
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  }

  absl::Status Abort(absl::Status status) {
    aborted_ = true;
    return status;
  }

  ncclComm_t comm_;
  cudaStream_t stream_;
  const int rank_;
  const int size_;
  const std::chrono::milliseconds timeout_;
  void* buffer_ = nullptr;
  size_t capacity_ = 0;
  bool aborted_ = false;
};

}  // namespace

int GpuCount() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) return 0;
  return count;
}

absl::StatusOr<std::unique_ptr<Collectives>> ConnectNccl(
    const LaunchEnv& env, std::chrono::milliseconds timeout) {
  if (env.nccl_unique_id_hex.empty()) {
    return absl::FailedPreconditionError(
        "TRL_NCCL_UNIQUE_ID is not set (the coordinator creates one per "
        "generation for GPU jobs when it was built with NCCL)");
  }
  ncclUniqueId id;
  static_assert(sizeof(id.internal) == 128, "ncclUniqueId is 128 bytes");
  for (size_t i = 0; i < sizeof(id.internal); ++i) {
    id.internal[i] =
        static_cast<char>(HexValue(env.nccl_unique_id_hex[2 * i]) * 16 +
                          HexValue(env.nccl_unique_id_hex[2 * i + 1]));
  }
  const int gpus = GpuCount();
  if (gpus == 0) return absl::FailedPreconditionError("no GPU is visible");
  if (cudaError_t e = cudaSetDevice(env.local_rank % gpus); e != cudaSuccess) {
    return CudaError("cudaSetDevice", e);
  }
  cudaStream_t stream;
  if (cudaError_t e = cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking);
      e != cudaSuccess) {
    return CudaError("cudaStreamCreate", e);
  }
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const auto deadline = Clock::now() + timeout;
  ncclResult_t started =
      ncclCommInitRankConfig(&comm, env.world_size, id, env.rank, &config);
  if (started != ncclSuccess && started != ncclInProgress) {
    if (comm != nullptr) ncclCommAbort(comm);
    cudaStreamDestroy(stream);
    return NcclError("ncclCommInitRankConfig", started);
  }
  absl::Status ready = AwaitComm(
      comm, deadline,
      absl::StrCat("NCCL initialisation of rank ", env.rank, " of ",
                   env.world_size, " (generation ", env.generation, ")"));
  if (!ready.ok()) {
    ncclCommAbort(comm);
    cudaStreamDestroy(stream);
    return ready;
  }
  return std::unique_ptr<Collectives>(
      new NcclCollectives(comm, stream, env.rank, env.world_size, timeout));
}

}  // namespace trl::worker
