#include <google/protobuf/util/json_util.h>
#include <google/protobuf/util/message_differencer.h>
#include <gtest/gtest.h>

#include "coordinator/status/json.h"
#include "proto/trl_launch.pb.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;

// protobuf's own parser reads back exactly what was written.
template <typename M>
M RoundTrip(const M& message) {
  M parsed;
  const std::string json = MessageToJson(message);
  auto status = google::protobuf::util::JsonStringToMessage(json, &parsed);
  EXPECT_TRUE(status.ok()) << status << "\n" << json;
  return parsed;
}

TEST(StatusJson, AJobStatusRoundTripsThroughProtobufsParser) {
  pb::JobStatus status;
  status.set_job_id("job \"7\"\\\n\x01 ünïcode");
  status.set_state("running");
  status.set_generation(int64_t{1} << 40);
  status.set_world_size(2);
  status.set_uptime_s(12.25);
  status.add_command("python3");
  status.add_command("train.py");
  auto* node = status.add_nodes();
  node->set_hostname("node01");
  node->set_last_heartbeat_age_s(0.1);
  for (int r = 0; r < 2; ++r) {
    auto* rank = status.add_ranks();
    rank->set_rank(r);
    rank->set_pid(100 + r);
    rank->set_state("running");
  }
  auto* failure = status.add_failures();
  failure->set_reason("rank 1 exited with code 5");
  failure->add_last_lines("Traceback:");
  const pb::JobStatus parsed = RoundTrip(status);
  EXPECT_TRUE(
      google::protobuf::util::MessageDifferencer::Equals(parsed, status))
      << parsed.DebugString();
}

TEST(StatusJson, PrintsEveryFieldAndMapsAndEmptyMessages) {
  pb::JobStatus empty;
  const std::string json = MessageToJson(empty);
  // proto3 JSON as `ps --json` printed it before: defaults included.
  EXPECT_NE(json.find("\"job_id\": \"\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"generation\": \"0\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"ranks\": []"), std::string::npos) << json;
  RoundTrip(empty);

  pb::Assignment with_map;
  (*with_map.mutable_job_environment())["RANK"] = "3";
  (*with_map.mutable_job_environment())["A\"B"] = "x";
  const pb::Assignment parsed = RoundTrip(with_map);
  EXPECT_EQ(parsed.job_environment().at("RANK"), "3");
  EXPECT_EQ(parsed.job_environment().at("A\"B"), "x");
}

}  // namespace
}  // namespace trl
