#include "coordinator/status/page.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "common/auth_token.h"

namespace trl {

namespace {

// The document; @NONCE@, @JOB@ and @COMMAND@ are filled in (escaped).
constexpr char kPage[] = R"html(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>trl-launch @JOB@</title>
<style nonce="@NONCE@">
body{font:14px/1.4 system-ui,sans-serif;margin:1em 2em;color:#222}
h1{font-size:1.3em;margin:0} h2{font-size:1.1em;margin:1.2em 0 .3em}
code,pre{font:12px ui-monospace,monospace} pre{background:#f4f4f4;
padding:.4em;margin:.2em 0 .6em;white-space:pre-wrap;overflow-wrap:anywhere}
table{border-collapse:collapse} td,th{padding:1px 8px;text-align:left;
border-bottom:1px solid #eee} th{background:#fafafa}
.facts span{margin-right:1.5em} .bad{color:#b00} .muted{color:#777}
.bar{height:10px;background:#4a8;display:inline-block}
.gap{height:10px;background:#d84;display:inline-block}
</style></head><body>
<h1>trl-launch job <span id="job">@JOB@</span></h1>
<div class="muted">command: <code id="command">@COMMAND@</code></div>
<p class="facts"><span>state <b id="state">?</b></span>
<span>generation <b id="generation">?</b></span>
<span>world size <b id="world">?</b></span>
<span>restarts <b id="restarts">?</b></span>
<span>uptime <b id="uptime">?</b></span>
<span id="updated" class="muted">loading</span></p>
<h2>Machines</h2><div id="machine-summary"></div>
<div id="awaited" class="bad"></div>
<div id="spares" class="muted"></div><div id="cordoned" class="bad"></div>
<input id="machine-filter" placeholder="search host, address, state">
<button id="machine-prev">&lt;</button><span id="machine-page"></span>
<button id="machine-next">&gt;</button>
<table><thead><tr><th>machine</th><th>host</th><th>address</th><th>state</th>
<th>heartbeat</th><th>workers</th></tr></thead><tbody id="machines"></tbody>
</table>
<h2>Ranks</h2><div id="rank-summary"></div>
<input id="rank-filter" placeholder="search rank, machine, state">
<button id="rank-prev">&lt;</button><span id="rank-page"></span>
<button id="rank-next">&gt;</button>
<table><thead><tr><th>rank</th><th>local</th><th>machine</th><th>pid</th>
<th>host</th><th>state</th><th>exit</th><th>last line</th></tr></thead>
<tbody id="ranks"></tbody></table>
<h2>Failures (root cause first)</h2><div id="failures">none</div>
<h2>Generations</h2>
<div class="muted">green: running; orange: from its ranks handed out to
all started, and from the failure to the end</div>
<table><thead><tr><th>generation</th><th>handed out</th><th>all running</th>
<th>stopping</th><th>ended</th><th></th></tr></thead>
<tbody id="timeline"></tbody></table>
<script nonce="@NONCE@">
"use strict";
// Text from the job is only ever set as textContent: never parsed as HTML.
const $ = (id) => document.getElementById(id);
function el(tag, ...children) {
  const node = document.createElement(tag);
  for (const child of children) {
    node.append(child instanceof Node ? child : String(child));
  }
  return node;
}
function row(...cells) { return el("tr", ...cells.map((c) => el("td", c))); }
// Rows per page: 50, or ?page_size=N (1..1000) in the page's address.
const PAGE = Math.min(1000, Math.max(1, Math.floor(Number(
    new URLSearchParams(location.search).get("page_size"))) || 50));
const MAX_GENERATIONS = 30;
const paging = {machine: 0, rank: 0};
const matching = {machine: 0, rank: 0};

function counts(states) {
  return states.map((c) => [c.state, c.count]).sort()
      .map(([state, count]) => state + " " + count).join(", ");
}
function seconds(s) { return s < 0 ? "-" : Number(s).toFixed(2) + " s"; }
function exitText(r) {
  if (r.state === "pending" || r.state === "running") return "-";
  if (r.state === "lost" || r.exit_code < 0) return "unknown";
  return r.signal ? "signal " + r.signal : String(r.exit_code);
}
// The server's answer for this page: the summary, and the page of each
// list that matches its search box (the server filters: never every row).
function query() {
  const params = new URLSearchParams({view: "summary"});
  for (const [kind, prefix] of [["rank", ""], ["machine", "machine_"]]) {
    params.set(prefix + "offset", paging[kind] * PAGE);
    params.set(prefix + "limit", PAGE);
    const filter = $(kind + "-filter").value.trim();
    if (filter) params.set(prefix + "q", filter);
  }
  return "api/status?" + params.toString();
}
// The page of rows the server sent, and "rows a-b of n".
function showPage(kind, rows, total, toRow) {
  matching[kind] = total;
  $(kind + "s").replaceChildren(...rows.map(toRow));
  const start = paging[kind] * PAGE;
  $(kind + "-page").textContent = total === 0 ? " none " :
      rows.length === 0 ? " - of " + total + " " :
      " " + (start + 1) + "-" + (start + rows.length) + " of " + total + " ";
}

function render(s) {
  const summary = s.summary;
  $("job").textContent = s.job_id;
  $("command").textContent = s.command.join(" ");
  $("state").textContent = s.state;
  $("generation").textContent = s.generation;
  $("world").textContent = s.world_size;
  $("restarts").textContent = Math.max(0, s.generation) + " (" +
      s.restarts_used + " of the budget of " + s.max_restarts + " used, " +
      Math.max(0, s.max_restarts - s.restarts_used) + " left)";
  $("uptime").textContent = seconds(s.uptime_s);
  $("machine-summary").textContent =
      summary.machines + " of " + s.num_machines + " machines: " +
      counts(summary.machine_states);
  // The machines it still waits for, and what to run on them.
  const awaited = s.awaited_machines || [];
  $("awaited").textContent = !s.awaited_count ? "" :
      "waiting for " + s.awaited_count + " machine(s) not registered (" +
      awaited.join(", ") + (s.awaited_count > awaited.length ? ", ..." : "") +
      "); on each, run: " + s.awaited_command + " N";
  // Spares waiting for a place, and hosts given no ranks until uncordoned.
  $("spares").textContent = (s.spares || []).length === 0 ? "" :
      "spares: " + s.spares.map((p) => p.hostname + " " + p.address +
          (p.unusable ? " (unusable: " + p.unusable + ")" : "")).join(", ");
  $("cordoned").textContent = (s.cordoned || []).map((c) =>
      "cordoned: " + c.hostname + " (" + c.reason + "; trl-coord uncordon " +
      c.hostname + " clears it)").join("; ");
  $("rank-summary").textContent = summary.ranks + " ranks: " +
      counts(summary.rank_states);
  showPage("machine", s.nodes, s.nodes_matching,
      (n) => row(n.machine_rank, n.hostname, n.address, n.state,
                 seconds(n.last_heartbeat_age_s) + " ago" +
                     (n.heartbeat_via ? " (" + n.heartbeat_via + ")" : ""),
                 n.workers));
  showPage("rank", s.ranks, s.ranks_matching,
      (r) => row(r.rank, r.local_rank, r.machine_rank, r.pid,
                 r.hostname || "-", r.state, exitText(r),
                 r.last_line ? r.last_line + " (" +
                     seconds(r.last_line_age_s) + " ago)" : ""));
  const recent = summary.recent_failures;
  const failures = recent.map((f) => el("div",
      el("b", "generation " + f.generation + ": "), f.reason,
      el("pre", f.last_lines.join("\n"))));
  if (summary.failures > recent.length) {
    failures.unshift(el("div", (summary.failures - recent.length) +
                                   " earlier failures not shown"));
  }
  $("failures").replaceChildren(...(failures.length ? failures : ["none"]));
  const gens = s.generations.slice(-MAX_GENERATIONS);
  const end = s.uptime_s;
  $("timeline").replaceChildren(...gens.map((g) => {
    const bar = el("td");
    const width = (from, to) => Math.max(1, Math.round((to - from) * 20));
    const running = g.running_at_s >= 0 ? g.running_at_s : end;
    const stopping = g.stopping_at_s >= 0 ? g.stopping_at_s :
                     g.ended_at_s >= 0 ? g.ended_at_s : end;
    const parts = [["gap", g.assigned_at_s, running], ["bar", running, stopping],
                   ["gap", stopping, g.ended_at_s >= 0 ? g.ended_at_s : end]];
    for (const [cls, from, to] of parts) {
      const span = el("span");
      span.className = cls;
      span.style.width = Math.min(400, width(from, to)) + "px";
      bar.append(span);
    }
    const r = row(g.generation, seconds(g.assigned_at_s),
                  seconds(g.running_at_s), seconds(g.stopping_at_s),
                  seconds(g.ended_at_s));
    r.append(bar);
    return r;
  }));
}

// One request at a time; a change of page or search asks again at once,
// and an answer to an older question than the last asked is dropped.
let asked = 0, timer = null;
async function refresh() {
  clearTimeout(timer);
  const mine = ++asked;
  try {
    const reply = await fetch(query(), {cache: "no-store"});
    if (!reply.ok) throw new Error("HTTP " + reply.status);
    const status = await reply.json();
    if (mine !== asked) return;
    render(status);
    // A page past the last (the rows matching fell): the last page.
    for (const kind of ["machine", "rank"]) {
      const last = Math.max(0, Math.ceil(matching[kind] / PAGE) - 1);
      if (paging[kind] > last) {
        paging[kind] = last;
        setTimeout(refresh, 0);
        return;
      }
    }
    $("updated").textContent = "updated " + new Date().toLocaleTimeString();
    $("updated").className = "muted";
  } catch (e) {
    if (mine !== asked) return;
    $("updated").textContent = "cannot reach the coordinator (" + e.message +
        "); showing the last status";
    $("updated").className = "bad";
  }
  timer = setTimeout(refresh, 1000);
}
for (const kind of ["machine", "rank"]) {
  $(kind + "-filter").addEventListener("input", () => {
    paging[kind] = 0;
    refresh();
  });
  $(kind + "-prev").addEventListener("click", () => {
    paging[kind] = Math.max(0, paging[kind] - 1);
    refresh();
  });
  $(kind + "-next").addEventListener("click", () => {
    if ((paging[kind] + 1) * PAGE < matching[kind]) paging[kind] += 1;
    refresh();
  });
}
refresh();
</script></body></html>
)html";

}  // namespace

std::string HtmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out.append("&amp;");
        break;
      case '<':
        out.append("&lt;");
        break;
      case '>':
        out.append("&gt;");
        break;
      case '"':
        out.append("&quot;");
        break;
      case '\'':
        out.append("&#39;");
        break;
      default:
        out.push_back(c);
    }
  }
  return out;
}

std::string RenderStatusPage(const trl::launch::v1::JobStatus& status,
                             const std::string& nonce) {
  return absl::StrReplaceAll(
      kPage, {{"@NONCE@", HtmlEscape(nonce)},
              {"@JOB@", HtmlEscape(status.job_id())},
              {"@COMMAND@", HtmlEscape(absl::StrJoin(status.command(), " "))}});
}

std::string NewPageNonce() {
  auto bytes = RandomBytes(16);
  std::string hex;
  for (unsigned char c : bytes.ok() ? *bytes : std::string(16, '\0')) {
    absl::StrAppendFormat(&hex, "%02x", c);
  }
  return hex;
}

std::string StatusPageSecurityPolicy(const std::string& nonce) {
  return absl::StrCat("default-src 'none'; script-src 'nonce-", nonce,
                      "'; style-src 'nonce-", nonce,
                      "'; connect-src 'self'; img-src 'none'; base-uri "
                      "'none'; form-action 'none'; frame-ancestors 'none'");
}

}  // namespace trl
