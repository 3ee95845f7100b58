// /api/status's query string: what each parameter asks for, and a 400
// naming the parameter for each that is wrong.
#include <gtest/gtest.h>

#include "coordinator/status/query.h"
#include "coordinator/status/routes.h"
#include "coordinator/status/table.h"
#include "coordinator/status/view.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;

TEST(StatusQueryTest, NoQueryIsTheWholeStatus) {
  for (const char* query : {"", "&", "view=full"}) {
    auto request = ParseStatusQuery(query);
    ASSERT_TRUE(request.ok()) << query << ": " << request.status();
    EXPECT_TRUE(AsksForWholeStatus(*request)) << query;
  }
}

TEST(StatusQueryTest, ASummaryAndPagesOfRanksAndMachines) {
  auto request = ParseStatusQuery(
      "view=summary&offset=100&limit=50&q=machine+3%20lost&machine_q=h%C3%BCst"
      "&machine_offset=7");
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_TRUE(request->summary());
  ASSERT_TRUE(request->has_ranks());
  EXPECT_EQ(request->ranks().offset(), 100);
  EXPECT_EQ(request->ranks().limit(), 50);
  EXPECT_EQ(request->ranks().filter(), "machine 3 lost");
  ASSERT_TRUE(request->has_nodes());
  EXPECT_EQ(request->nodes().offset(), 7);
  EXPECT_EQ(request->nodes().limit(), kDefaultPageLimit);
  EXPECT_EQ(request->nodes().filter(), "h\xC3\xBCst");

  request = ParseStatusQuery("view=summary");
  ASSERT_TRUE(request.ok());
  EXPECT_TRUE(request->summary());
  EXPECT_FALSE(request->has_ranks());
  EXPECT_FALSE(request->has_nodes());

  request = ParseStatusQuery("q=failed");
  ASSERT_TRUE(request.ok());
  EXPECT_FALSE(request->summary());
  EXPECT_EQ(request->ranks().limit(), kDefaultPageLimit);
  EXPECT_EQ(request->ranks().filter(), "failed");
}

TEST(StatusQueryTest, EachBadParameterIsNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"limit=0", "'limit'"},
      {"limit=1001", "'limit'"},
      {"limit=ten", "'limit'"},
      {"offset=-1", "'offset'"},
      {"offset=1&offset=2", "'offset'"},
      {"machine_limit=5000", "'machine_limit'"},
      {"view=everything", "'view'"},
      {"view=full&limit=5", "'view'"},
      {"q=%zz", "'q'"},
      {"q=%4", "'q'"},
      {"bogus=1", "'bogus'"},
  };
  for (const auto& [query, named] : cases) {
    auto request = ParseStatusQuery(query);
    ASSERT_FALSE(request.ok()) << query;
    EXPECT_NE(request.status().message().find(named), std::string::npos)
        << query << ": " << request.status();
  }
  EXPECT_FALSE(
      ParseStatusQuery("q=" + std::string(kMaxFilterLength + 1, 'x')).ok());
}

// Through the routes: 400 with the message, and the views as JSON.
TEST(StatusQueryTest, TheRoutesAnswerABadQueryWith400AndServeTheViews) {
  pb::JobStatus whole;
  whole.set_job_id("job-5");
  for (int r = 0; r < 100; ++r) {
    auto* rank = whole.add_ranks();
    rank->set_rank(r);
    rank->set_state(r == 77 ? "failed" : "running");
  }
  StatusSources sources{[whole] { return whole; }, [] { return "abc"; }};
  auto get = [&](const std::string& target) {
    return HandleStatusRequest({"GET", target, "127.0.0.1:8001"}, sources);
  };
  const HttpResponse bad = get("/api/status?limit=100000");
  EXPECT_EQ(bad.status, 400);
  EXPECT_NE(bad.body.find("bad parameter 'limit'"), std::string::npos)
      << bad.body;
  EXPECT_EQ(get("/api/status?nope").status, 400);
  EXPECT_EQ(get("/api/status").body, FormatJobJson(whole));
  pb::JobStatusRequest request = SummaryRequest();
  request.mutable_ranks()->set_offset(70);
  request.mutable_ranks()->set_limit(10);
  const HttpResponse page = get("/api/status?view=summary&offset=70&limit=10");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.body, FormatJobJson(ApplyStatusRequest(whole, request)));
  EXPECT_NE(page.body.find("\"ranks_matching\": 100"), std::string::npos);
  EXPECT_EQ(page.body.find("\"rank\": 69,"), std::string::npos);
  EXPECT_NE(page.body.find("\"rank\": 79,"), std::string::npos);
  EXPECT_EQ(page.body.find("\"rank\": 80,"), std::string::npos);

  // With a source of views (the coordinator's), the request reaches it.
  pb::JobStatusRequest seen;
  sources.status = [&](const pb::JobStatusRequest& asked) {
    seen = asked;
    return pb::JobStatus();
  };
  EXPECT_EQ(get("/api/status?machine_q=x&machine_limit=3").status, 200);
  EXPECT_EQ(seen.nodes().filter(), "x");
  EXPECT_EQ(seen.nodes().limit(), 3);
  EXPECT_FALSE(seen.has_ranks());
}

}  // namespace
}  // namespace trl
