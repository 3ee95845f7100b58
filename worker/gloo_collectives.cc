#include "worker/gloo_collectives.h"

#include <gloo/allreduce.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/store.h>
#include <gloo/transport/tcp/device.h>

#include <exception>

#include "absl/strings/str_cat.h"
#include "worker/store_client.h"

namespace trl::worker {
namespace {

// Gloo's rendezvous calls these; it knows failures only as exceptions.
class GlooStore : public gloo::rendezvous::Store {
 public:
  GlooStore(std::unique_ptr<StoreClient> client,
            std::chrono::milliseconds timeout)
      : client_(std::move(client)), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override {
    Check(client_->Set(key, std::string(data.begin(), data.end())));
  }

  std::vector<char> get(const std::string& key) override {
    auto values = client_->Get({key}, timeout_);
    Check(values.status());
    return std::vector<char>(values->at(0).begin(), values->at(0).end());
  }

  void wait(const std::vector<std::string>& keys) override {
    wait(keys, timeout_);
  }

  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override {
    Check(client_->Wait(keys, timeout));
  }

 private:
  static void Check(const absl::Status& status) {
    if (!status.ok()) throw std::runtime_error(std::string(status.message()));
  }

  std::unique_ptr<StoreClient> client_;
  const std::chrono::milliseconds timeout_;
};

class GlooCollectives : public Collectives {
 public:
  GlooCollectives(std::shared_ptr<gloo::rendezvous::Context> context,
                  std::chrono::milliseconds timeout)
      : context_(std::move(context)), timeout_(timeout) {}

  int rank() const override { return context_->rank; }
  int size() const override { return context_->size; }
  std::string name() const override { return "Gloo (TCP)"; }

  absl::Status AllReduceSum(float* data, size_t count) override {
    try {
      gloo::AllreduceOptions options(context_);
      options.setOutput(data, count);
      options.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(
              &gloo::sum<float>));
      options.setTag(next_tag_++);
      options.setTimeout(timeout_);
      gloo::allreduce(options);
    } catch (const std::exception& error) {
      return absl::UnavailableError(
          absl::StrCat("Gloo all-reduce failed: ", error.what()));
    }
    return absl::OkStatus();
  }

  absl::Status Broadcast(void* data, size_t bytes, int root) override {
    try {
      gloo::BroadcastOptions options(context_);
      options.setOutput(static_cast<char*>(data), bytes);
      options.setRoot(root);
      options.setTag(next_tag_++);
      options.setTimeout(timeout_);
      gloo::broadcast(options);
    } catch (const std::exception& error) {
      return absl::UnavailableError(
          absl::StrCat("Gloo broadcast failed: ", error.what()));
    }
    return absl::OkStatus();
  }

 private:
  std::shared_ptr<gloo::rendezvous::Context> context_;
  const std::chrono::milliseconds timeout_;
  uint32_t next_tag_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Collectives>> ConnectGloo(
    const LaunchEnv& env, std::chrono::milliseconds timeout) {
  auto client = StoreClient::Create(env);
  if (!client.ok()) return client.status();
  GlooStore store(std::move(*client), timeout);
  try {
    gloo::transport::tcp::attr attr;
    // The interface the launcher named (the one carrying this machine's
    // advertised address), else whatever this host's name resolves to.
    if (!env.socket_ifname.empty()) attr.iface = env.socket_ifname;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    auto context =
        std::make_shared<gloo::rendezvous::Context>(env.rank, env.world_size);
    context->setTimeout(timeout);
    context->connectFullMesh(store, device);
    return std::unique_ptr<Collectives>(
        new GlooCollectives(std::move(context), timeout));
  } catch (const std::exception& error) {
    return absl::UnavailableError(absl::StrCat(
        "rank ", env.rank, " of ", env.world_size,
        " could not join the Gloo group of generation ", env.generation,
        " within ", timeout.count(), " ms: ", error.what()));
  }
}

}  // namespace trl::worker
