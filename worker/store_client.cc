#include "worker/store_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"
#include "common/tls_credentials.h"
#include "proto/trl_launch.grpc.pb.h"

namespace trl::worker {

namespace pb = trl::launch::v1;

namespace {

// A unary call's own deadline, beyond the store's wait.
constexpr std::chrono::seconds kCallSlack(10);

absl::Status FromGrpc(const grpc::Status& status, const std::string& what) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(
      static_cast<absl::StatusCode>(status.error_code()),
      absl::StrCat("store ", what, ": ", status.error_message()));
}

}  // namespace

class StoreClient::Impl {
 public:
  Impl(const LaunchEnv& env, std::shared_ptr<grpc::Channel> channel)
      : token_(env.store_token), stub_(pb::Store::NewStub(channel)) {
    scope_.set_job_id(env.job_id);
    scope_.set_generation(env.generation);
  }

  void Prepare(grpc::ClientContext* context,
               std::chrono::milliseconds wait) const {
    context->AddMetadata("authorization", "Bearer " + token_);
    context->set_deadline(std::chrono::system_clock::now() + wait + kCallSlack);
  }

  absl::StatusOr<std::vector<std::string>> Get(
      const std::vector<std::string>& keys, std::chrono::milliseconds timeout,
      bool want_values) {
    grpc::ClientContext context;
    Prepare(&context, timeout);
    context.set_wait_for_ready(true);
    pb::StoreGetRequest request;
    *request.mutable_scope() = scope_;
    for (const auto& key : keys) request.add_keys(key);
    request.set_timeout_ms(static_cast<uint32_t>(timeout.count()));
    request.set_want_values(want_values);
    pb::StoreGetReply reply;
    absl::Status status = FromGrpc(stub_->Get(&context, request, &reply),
                                   want_values ? "get" : "wait");
    if (!status.ok()) return status;
    return std::vector<std::string>(reply.values().begin(),
                                    reply.values().end());
  }

  const std::string token_;
  pb::StoreNamespace scope_;
  std::unique_ptr<pb::Store::Stub> stub_;
};

absl::StatusOr<std::unique_ptr<StoreClient>> StoreClient::Create(
    const LaunchEnv& env) {
  if (!env.has_store()) {
    return absl::FailedPreconditionError(
        "the coordinator's store needs TRL_COORDINATOR_ADDR and "
        "TRL_STORE_TOKEN (start this program with trl-launch)");
  }
  TlsFiles tls{env.tls_cert_file, env.tls_key_file, env.tls_ca_file};
  auto credentials = ClientCredentials(tls);
  if (!credentials.ok()) return credentials.status();
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(4 << 20);
  if (!env.tls_server_name.empty()) {
    args.SetSslTargetNameOverride(env.tls_server_name);
  }
  auto channel =
      grpc::CreateCustomChannel(env.coordinator_address, *credentials, args);
  return std::unique_ptr<StoreClient>(
      new StoreClient(std::make_unique<Impl>(env, channel)));
}

StoreClient::StoreClient(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
StoreClient::~StoreClient() = default;

absl::Status StoreClient::Set(const std::string& key,
                              const std::string& value) {
  grpc::ClientContext context;
  impl_->Prepare(&context, std::chrono::milliseconds(0));
  context.set_wait_for_ready(true);
  pb::StoreSetRequest request;
  *request.mutable_scope() = impl_->scope_;
  request.set_key(key);
  request.set_value(value);
  pb::StoreSetReply reply;
  return FromGrpc(impl_->stub_->Set(&context, request, &reply),
                  absl::StrCat("set '", key, "'"));
}

absl::StatusOr<std::vector<std::string>> StoreClient::Get(
    const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  return impl_->Get(keys, timeout, /*want_values=*/true);
}

absl::Status StoreClient::Wait(const std::vector<std::string>& keys,
                               std::chrono::milliseconds timeout) {
  return impl_->Get(keys, timeout, /*want_values=*/false).status();
}

absl::StatusOr<int64_t> StoreClient::Add(const std::string& key,
                                         int64_t delta) {
  grpc::ClientContext context;
  impl_->Prepare(&context, std::chrono::milliseconds(0));
  context.set_wait_for_ready(true);
  pb::StoreAddRequest request;
  *request.mutable_scope() = impl_->scope_;
  request.set_key(key);
  request.set_delta(delta);
  pb::StoreAddReply reply;
  absl::Status status = FromGrpc(impl_->stub_->Add(&context, request, &reply),
                                 absl::StrCat("add '", key, "'"));
  if (!status.ok()) return status;
  return reply.value();
}

}  // namespace trl::worker
