#include "coordinator/status_routes.h"

#include <arpa/inet.h>

#include "absl/strings/ascii.h"
#include "coordinator/job_status.h"
#include "coordinator/status_json.h"
#include "coordinator/status_metrics.h"
#include "coordinator/status_page.h"

namespace trl {

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
  const std::string path = request.target.substr(0, request.target.find('?'));
  if (path == "/api/status") {
    HttpResponse response;
    response.content_type = "application/json";
    response.body = FormatJobJson(sources.snapshot());
    return response;
  }
  if (path == "/api/events" && sources.events) {
    HttpResponse response;
    response.content_type = "application/json";
    response.body = MessageToJson(sources.events());
    return response;
  }
  if (path == "/metrics") {
    HttpResponse response;
    response.content_type = kMetricsContentType;
    response.body = FormatMetrics(sources.snapshot());
    return response;
  }
  if (path == "/") {
    const std::string nonce = sources.nonce();
    return HttpResponse{
        200,
        "text/html; charset=utf-8",
        RenderStatusPage(sources.snapshot(), nonce),
        {{"Content-Security-Policy", StatusPageSecurityPolicy(nonce)},
         {"Referrer-Policy", "no-referrer"}}};
  }
  return TextResponse(404,
                      "not found: try /, /api/status, /api/events or "
                      "/metrics\n");
}

}  // namespace trl
