#include "coordinator/status/routes.h"

#include <arpa/inet.h>

#include "absl/strings/ascii.h"
#include "coordinator/status/json.h"
#include "coordinator/status/metrics.h"
#include "coordinator/status/page.h"
#include "coordinator/status/query.h"
#include "coordinator/status/table.h"
#include "coordinator/status/view.h"

namespace trl {

namespace pb = trl::launch::v1;

bool IsLoopbackIp(const std::string& address) {
  in_addr v4{};
  if (inet_pton(AF_INET, address.c_str(), &v4) == 1) {
    return (ntohl(v4.s_addr) >> 24) == 127;
  }
  in6_addr v6{};
  return inet_pton(AF_INET6, address.c_str(), &v6) == 1 &&
         IN6_IS_ADDR_LOOPBACK(&v6);
}

bool IsLoopbackHost(const std::string& host) {
  std::string name = host;
  if (!name.empty() && name[0] == '[') {
    const size_t close = name.find(']');
    if (close == std::string::npos) return false;
    const std::string rest = name.substr(close + 1);
    if (!rest.empty() && rest[0] != ':') return false;
    name = name.substr(1, close - 1);
  } else if (const size_t colon = name.find(':'); colon != std::string::npos) {
    name = name.substr(0, colon);
  }
  return absl::AsciiStrToLower(name) == "localhost" || IsLoopbackIp(name);
}

namespace {

// The job's facts only (the page is served with its id and command): a
// slice of no machines.
pb::JobStatusRequest JobFactsRequest() {
  pb::JobStatusRequest request;
  request.mutable_nodes()->set_limit(0);
  return request;
}

// A source's failure as the answer: 503 while the coordinator cannot be
// reached (try again), 502 for any other error of it.
HttpResponse SourceFailed(const absl::Status& status) {
  const bool unreachable =
      absl::IsUnavailable(status) || absl::IsDeadlineExceeded(status);
  return TextResponse(unreachable ? 503 : 502,
                      std::string(status.message()) + "\n");
}

}  // namespace

HttpResponse HandleStatusRequest(const HttpRequest& request,
                                 const StatusSources& sources) {
  if (request.method != "GET" && request.method != "HEAD") {
    HttpResponse response = TextResponse(405, "only GET and HEAD\n");
    response.headers = {{"Allow", "GET, HEAD"}};
    return response;
  }
  if (!IsLoopbackHost(request.host)) {
    return TextResponse(403,
                        "served to loopback names only (Host: localhost or "
                        "127.0.0.1)\n");
  }
  const size_t question = request.target.find('?');
  const std::string path = request.target.substr(0, question);
  auto status =
      [&sources](
          const pb::JobStatusRequest& asked) -> absl::StatusOr<pb::JobStatus> {
    if (sources.status) return sources.status(asked);
    auto whole = sources.snapshot();
    if (!whole.ok()) return whole.status();
    return ApplyStatusRequest(*whole, asked);
  };
  if (path == "/api/status") {
    const auto asked = ParseStatusQuery(
        question == std::string::npos
            ? std::string_view()
            : std::string_view(request.target).substr(question + 1));
    if (!asked.ok()) {
      return TextResponse(400, std::string(asked.status().message()) + "\n");
    }
    const auto answer = status(*asked);
    if (!answer.ok()) return SourceFailed(answer.status());
    HttpResponse response;
    response.content_type = "application/json";
    response.body = FormatJobJson(*answer);
    return response;
  }
  if (path == "/api/events" && sources.events) {
    const auto events = sources.events();
    if (!events.ok()) return SourceFailed(events.status());
    HttpResponse response;
    response.content_type = "application/json";
    response.body = MessageToJson(*events);
    return response;
  }
  if (path == "/metrics") {
    // The summary and every machine, not every rank (status/view.h).
    const auto counts = status(MetricsRequest());
    if (!counts.ok()) return SourceFailed(counts.status());
    HttpResponse response;
    response.content_type = kMetricsContentType;
    response.body = FormatMetrics(*counts);
    return response;
  }
  if (path == "/") {
    const auto facts = status(JobFactsRequest());
    if (!facts.ok()) return SourceFailed(facts.status());
    const std::string nonce = sources.nonce();
    return HttpResponse{
        200,
        "text/html; charset=utf-8",
        RenderStatusPage(*facts, nonce),
        {{"Content-Security-Policy", StatusPageSecurityPolicy(nonce)},
         {"Referrer-Policy", "no-referrer"}}};
  }
  return TextResponse(404,
                      "not found: try /, /api/status, /api/events or "
                      "/metrics\n");
}

}  // namespace trl
