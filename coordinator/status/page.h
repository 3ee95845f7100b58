// The status page: one self-contained HTML document (no external assets)
// whose script fetches, every second, the summary and one page of the
// machines and of the ranks from /api/status (?view=summary&offset=..&
// limit=50&q=..&machine_offset=..: the server pages and searches, so a
// job of 16,384 machines costs the page a few kilobytes a second, not
// megabytes) and renders them: counts by state, one page of rows at a
// time with a search box, the last failures, the generations.
//
// Everything from the job (hostnames, argv, workers' last lines) is
// attacker-controlled text: the server escapes what it writes into the
// document (HtmlEscape), and the script only ever sets textContent, never
// HTML. The Content-Security-Policy allows only the page's own script and
// style (by a nonce per response) and requests to its own origin.
#ifndef TRL_COORDINATOR_STATUS_PAGE_H_
#define TRL_COORDINATOR_STATUS_PAGE_H_

#include <string>

#include "proto/trl_launch.pb.h"

namespace trl {

// & < > " ' as character references: safe in text and in quoted
// attribute values.
std::string HtmlEscape(const std::string& text);

// The page, with the job's id and command as it was when served.
// `nonce` (base64 or hex, no quotes) marks the page's script and style.
std::string RenderStatusPage(const trl::launch::v1::JobStatus& status,
                             const std::string& nonce);

// A fresh random nonce (32 hex digits) for one page.
std::string NewPageNonce();

// The Content-Security-Policy header that goes with it.
std::string StatusPageSecurityPolicy(const std::string& nonce);

}  // namespace trl

#endif  // TRL_COORDINATOR_STATUS_PAGE_H_
