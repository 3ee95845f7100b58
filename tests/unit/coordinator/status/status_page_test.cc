#include <gtest/gtest.h>

#include "coordinator/status/job_status.h"
#include "coordinator/status/metrics.h"
#include "coordinator/status/page.h"
#include "coordinator/status/routes.h"
#include "coordinator/status/table.h"
#include "coordinator/status/view.h"

namespace trl {
namespace {

namespace pb = trl::launch::v1;

TEST(StatusPageTest, HtmlEscapeTurnsMarkupIntoText) {
  EXPECT_EQ(HtmlEscape("<img src=x onerror=alert(1)>"),
            "&lt;img src=x onerror=alert(1)&gt;");
  EXPECT_EQ(HtmlEscape("a&b \"q\" 's'"), "a&amp;b &quot;q&quot; &#39;s&#39;");
  EXPECT_EQ(HtmlEscape("plain host-01"), "plain host-01");
}

TEST(StatusPageTest, ThePageShowsTheJobsTextEscapedAndLoadsNothingElse) {
  pb::JobStatus status;
  status.set_job_id("job-9");
  status.add_command("train.py");
  status.add_command("--name=</code><script>alert(1)</script>");
  const std::string page = RenderStatusPage(status, "n0nce");
  EXPECT_EQ(page.find("<script>alert(1)"), std::string::npos);
  EXPECT_NE(page.find("--name=&lt;/code&gt;&lt;script&gt;alert(1)&lt;/script"
                      "&gt;"),
            std::string::npos);
  EXPECT_NE(page.find("<script nonce=\"n0nce\">"), std::string::npos);
  EXPECT_NE(page.find("trl-launch job <span id=\"job\">job-9</span>"),
            std::string::npos);
  // Self-contained: no external script, style, font or image.
  EXPECT_EQ(page.find("http://"), std::string::npos);
  EXPECT_EQ(page.find("https://"), std::string::npos);
  EXPECT_EQ(page.find(" src="), std::string::npos);
  // The script sets text, never markup.
  EXPECT_EQ(page.find("innerHTML"), std::string::npos);
  EXPECT_EQ(page.find("insertAdjacentHTML"), std::string::npos);
}

StatusSources Sources(const pb::JobStatus& status) {
  return StatusSources{[status] { return status; }, [] { return "abc"; }};
}

// /metrics asks its source for the metrics view, not for every rank, and
// renders what the whole status would.
TEST(StatusPageTest, MetricsAskForTheMachinesAndCountsNotEveryRank) {
  pb::JobStatus whole;
  whole.set_job_id("job-4");
  for (int m = 0; m < 2; ++m) {
    pb::NodeStatus* node = whole.add_nodes();
    node->set_machine_rank(m);
    node->set_state("running");
    node->set_last_heartbeat_age_s(0.5 + m);
  }
  for (int r = 0; r < 4; ++r) {
    whole.add_ranks()->set_rank(r);
    whole.mutable_ranks(r)->set_state(r == 3 ? "failed" : "running");
  }
  std::vector<pb::JobStatusRequest> asked;
  StatusSources sources = Sources(whole);
  sources.status = [&](const pb::JobStatusRequest& request) {
    asked.push_back(request);
    return ApplyStatusRequest(whole, request);
  };
  const HttpResponse response =
      HandleStatusRequest({"GET", "/metrics", "localhost"}, sources);
  EXPECT_EQ(response.body, FormatMetrics(whole));
  ASSERT_EQ(asked.size(), 1u);
  EXPECT_TRUE(asked[0].every_node());
  EXPECT_FALSE(asked[0].has_ranks());
}

// `trl-coord ui`'s sources fail while the coordinator is gone: every
// route says so, 503 for a coordinator that cannot be reached (try again),
// 502 for another refusal.
TEST(StatusPageTest, ASourceThatFailsIsAnswered503Or502WithItsText) {
  for (const auto& [failure, code] : std::vector<std::pair<absl::Status, int>>{
           {absl::UnavailableError("the coordinator cannot be reached"), 503},
           {absl::DeadlineExceededError("the coordinator cannot be reached"),
            503},
           {absl::ResourceExhaustedError("the coordinator cannot be reached"),
            502}}) {
    StatusSources sources;
    sources.snapshot = [failure = failure]() -> absl::StatusOr<pb::JobStatus> {
      return failure;
    };
    sources.events = [failure = failure]() -> absl::StatusOr<pb::JobEvents> {
      return failure;
    };
    sources.nonce = [] { return "abc"; };
    for (const char* target : {"/", "/api/status", "/api/status?view=summary",
                               "/api/events", "/metrics"}) {
      const HttpResponse response =
          HandleStatusRequest({"GET", target, "localhost"}, sources);
      EXPECT_EQ(response.status, code) << target << " " << failure;
      EXPECT_EQ(response.body, "the coordinator cannot be reached\n");
    }
  }
}

TEST(StatusPageTest, RoutesServeThePsJsonTheMetricsAndThePage) {
  pb::JobStatus status;
  status.set_job_id("job-3");
  status.set_generation(4);
  const auto sources = Sources(status);
  auto get = [&](const std::string& target) {
    return HandleStatusRequest({"GET", target, "127.0.0.1:8001"}, sources);
  };
  EXPECT_EQ(get("/api/status").body, FormatJobJson(status));
  EXPECT_EQ(get("/api/status").content_type, "application/json");
  EXPECT_EQ(get("/metrics?x=1").body, FormatMetrics(status));
  EXPECT_EQ(get("/metrics").content_type, kMetricsContentType);
  const HttpResponse page = get("/");
  EXPECT_EQ(page.status, 200);
  ASSERT_FALSE(page.headers.empty());
  EXPECT_EQ(page.headers[0].first, "Content-Security-Policy");
  EXPECT_NE(page.headers[0].second.find("script-src 'nonce-abc'"),
            std::string::npos);
  EXPECT_EQ(get("/etc/passwd").status, 404);
  EXPECT_EQ(HandleStatusRequest({"POST", "/", "localhost"}, sources).status,
            405);
}

// DNS rebinding: a page of evil.example whose name now resolves to
// 127.0.0.1 sends Host: evil.example.
TEST(StatusPageTest, OnlyRequestsNamingLoopbackAreServed) {
  const auto sources = Sources(pb::JobStatus());
  for (const char* host : {"127.0.0.1", "127.0.0.1:8001", "localhost:9",
                           "LOCALHOST", "[::1]:80", "[::1]", "127.9.9.9:1"}) {
    EXPECT_EQ(HandleStatusRequest({"GET", "/metrics", host}, sources).status,
              200)
        << host;
  }
  for (const char* host :
       {"", "evil.example", "evil.example:8001", "127.0.0.1.evil.example",
        "10.0.0.1:8001", "[::1]evil", "localhost.evil.example"}) {
    EXPECT_EQ(HandleStatusRequest({"GET", "/metrics", host}, sources).status,
              403)
        << host;
  }
}

TEST(StatusPageTest, OnlyNumericLoopbackAddressesMayBeListenedOn) {
  for (const char* yes : {"127.0.0.1", "127.1.2.3", "::1"}) {
    EXPECT_TRUE(IsLoopbackIp(yes)) << yes;
  }
  for (const char* no :
       {"0.0.0.0", "::", "10.0.0.1", "localhost", "127.evil.example", ""}) {
    EXPECT_FALSE(IsLoopbackIp(no)) << no;
  }
}

TEST(StatusPageTest, RequestHeadsParseOrAreRefused) {
  auto request = ParseHttpRequestHead(
      "GET /api/status HTTP/1.1\r\nhOsT:  localhost:8 \r\nX: y\r\n");
  ASSERT_TRUE(request);
  EXPECT_EQ(request->method, "GET");
  EXPECT_EQ(request->target, "/api/status");
  EXPECT_EQ(request->host, "localhost:8");
  EXPECT_FALSE(ParseHttpRequestHead("GET http://x/ HTTP/1.1\r\n"));
  EXPECT_FALSE(ParseHttpRequestHead("hello\r\n"));
  EXPECT_FALSE(ParseHttpRequestHead("GET / SPDY/3\r\n"));
}

}  // namespace
}  // namespace trl
