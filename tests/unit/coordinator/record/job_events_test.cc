// The job's history file: kept for a resumed job, begun anew for a new
// one, bounded in memory and on disk, and readable by `trl-coord events`.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "coordinator/record/events.h"
#include "coordinator/status/routes.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;

class JobEventsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char dir_template[] = "/tmp/trl-events-XXXXXX";
    ASSERT_NE(mkdtemp(dir_template), nullptr);
    dir_ = dir_template;
    path_ = JobEventLog::PathFor(dir_ + "/coord.state");
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  static pb::JobEvent Event(const std::string& kind, int64_t generation,
                            const std::string& text = "") {
    pb::JobEvent event;
    event.set_kind(kind);
    event.set_generation(generation);
    event.set_machine_rank(-1);
    event.set_text(text);
    return event;
  }

  std::string dir_;
  std::string path_;
};

TEST_F(JobEventsTest, AResumedJobKeepsItsHistoryANewJobStartsAnew) {
  {
    JobEventLog log(path_, /*resume=*/false);
    log.Append(Event("generation", 0));
    log.Append(Event("stopping", 0, "rank 1 exited with code 3"));
  }
  {
    JobEventLog resumed(path_, /*resume=*/true);
    resumed.Append(Event("resumed", 0));
    const pb::JobEvents all = resumed.All();
    ASSERT_EQ(all.events_size(), 3);
    EXPECT_EQ(all.events(1).text(), "rank 1 exited with code 3");
    EXPECT_GT(all.events(0).unix_ms(), 0);  // stamped
    EXPECT_EQ(ReadJobEvents(path_)->events_size(), 3);
  }
  JobEventLog other(path_, /*resume=*/false);
  EXPECT_EQ(other.All().events_size(), 0);
  EXPECT_EQ(ReadJobEvents(path_)->events_size(), 0);
}

TEST_F(JobEventsTest, DeferredEventsAreWrittenAtTheNextFlush) {
  JobEventLog log(path_, /*resume=*/false);
  log.Append(Event("registered", -1), /*deferred=*/true);
  log.Append(Event("registered", -1), /*deferred=*/true);
  EXPECT_EQ(log.All().events_size(), 2);
  EXPECT_EQ(ReadJobEvents(path_)->events_size(), 0);
  log.Flush();
  EXPECT_EQ(ReadJobEvents(path_)->events_size(), 2);
  // An event that is not deferred takes what waits with it.
  log.Append(Event("registered", -1), /*deferred=*/true);
  log.Append(Event("generation", 0));
  EXPECT_EQ(ReadJobEvents(path_)->events_size(), 4);
}

TEST_F(JobEventsTest, MemoryAndTheFileAreBounded) {
  JobEventLog log(path_, /*resume=*/false);
  const size_t total = 2 * JobEventLog::kMaxEvents + 5;
  for (size_t i = 0; i < total; ++i) {
    log.Append(Event("generation", static_cast<int64_t>(i)));
  }
  const pb::JobEvents kept = log.All();
  ASSERT_EQ(kept.events_size(), static_cast<int>(JobEventLog::kMaxEvents));
  EXPECT_EQ(kept.events(0).generation(),
            static_cast<int64_t>(total - JobEventLog::kMaxEvents));
  // The file was written anew once it held twice what is kept.
  size_t lines = 0;
  std::ifstream file(path_);
  for (std::string line; std::getline(file, line);) ++lines;
  EXPECT_LE(lines, 2 * JobEventLog::kMaxEvents);
  const pb::JobEvents read = *ReadJobEvents(path_);
  ASSERT_EQ(read.events_size(), static_cast<int>(JobEventLog::kMaxEvents));
  EXPECT_EQ(read.events(read.events_size() - 1).generation(),
            static_cast<int64_t>(total - 1));
}

TEST_F(JobEventsTest, ALineThatDoesNotParseIsSkipped) {
  std::ofstream(path_) << "{\"kind\": \"generation\", \"generation\": \"4\"}\n"
                       << "not json\n"
                       << "{\"kind\": \"finished\"}\n";
  std::filesystem::permissions(path_, std::filesystem::perms::owner_read |
                                          std::filesystem::perms::owner_write);
  const pb::JobEvents read = *ReadJobEvents(path_);
  ASSERT_EQ(read.events_size(), 2);
  EXPECT_EQ(read.events(0).generation(), 4);
  EXPECT_EQ(read.events(1).kind(), "finished");
}

TEST_F(JobEventsTest, AFileOthersMayWriteIsRefusedNotReadAsEmpty) {
  { JobEventLog log(path_, /*resume=*/false); }
  std::filesystem::permissions(path_, std::filesystem::perms::others_write,
                               std::filesystem::perm_options::add);
  const auto read = ReadJobEvents(path_);
  EXPECT_FALSE(read.ok());
  EXPECT_FALSE(absl::IsNotFound(read.status())) << read.status();
  EXPECT_TRUE(absl::IsNotFound(ReadJobEvents(dir_ + "/none").status()));
}

TEST_F(JobEventsTest, TheStatusServerServesTheHistoryAsJson) {
  StatusSources sources;
  sources.events = [] {
    pb::JobEvents events;
    *events.add_events() = Event("lost", 2, "sent no heartbeat for 3.1 s");
    return events;
  };
  HttpRequest request;
  request.method = "GET";
  request.target = "/api/events";
  request.host = "localhost";
  const HttpResponse response = HandleStatusRequest(request, sources);
  EXPECT_EQ(response.status, 200);
  EXPECT_EQ(response.content_type, "application/json");
  EXPECT_NE(response.body.find("\"text\": \"sent no heartbeat for 3.1 s\""),
            std::string::npos)
      << response.body;
  request.host = "evil.example";  // DNS rebinding
  EXPECT_EQ(HandleStatusRequest(request, sources).status, 403);
}

TEST(KeepNewestEventsTest, KeepsTheNewestWithinTheCountAndTheBytes) {
  pb::JobEvents events;
  for (int i = 0; i < 10; ++i) {
    pb::JobEvent* event = events.add_events();
    event->set_generation(i);
    event->set_text(std::string(100, 'x'));
  }
  pb::JobEvents by_count = events;
  KeepNewestEvents(&by_count, 3, 1 << 20);
  ASSERT_EQ(by_count.events_size(), 3);
  EXPECT_EQ(by_count.events(0).generation(), 7);
  EXPECT_EQ(by_count.events(2).generation(), 9);
  EXPECT_EQ(by_count.left_out(), 7);
  // Each event is about 110 bytes: 500 bytes hold 4 of them.
  pb::JobEvents by_bytes = events;
  KeepNewestEvents(&by_bytes, 0, 500);
  ASSERT_EQ(by_bytes.events_size(), 4);
  EXPECT_EQ(by_bytes.events(0).generation(), 6);
  EXPECT_EQ(by_bytes.left_out(), 6);
  EXPECT_LE(by_bytes.ByteSizeLong(), 500u);
  pb::JobEvents all = events;
  KeepNewestEvents(&all, 0, 1 << 20);
  EXPECT_EQ(all.events_size(), 10);
  EXPECT_EQ(all.left_out(), 0);
}

}  // namespace
}  // namespace trl
