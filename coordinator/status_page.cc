#include "coordinator/status_page.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"

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
<th>state</th><th>exit</th></tr></thead><tbody id="ranks"></tbody></table>
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
const PAGE = 50, MAX_FAILURES = 20, MAX_GENERATIONS = 30;
const paging = {machine: 0, rank: 0};
let last = null;

function counts(items) {
  const by = {};
  for (const item of items) by[item.state] = (by[item.state] || 0) + 1;
  return Object.keys(by).sort().map((s) => s + " " + by[s]).join(", ");
}
function seconds(s) { return s < 0 ? "-" : Number(s).toFixed(2) + " s"; }
function exitText(r) {
  if (r.state === "pending" || r.state === "running") return "-";
  return r.signal ? "signal " + r.signal : String(r.exit_code);
}
// One page of the rows that match the search box, and "rows a-b of n".
function showPage(kind, items, text, toRow) {
  const filter = $(kind + "-filter").value.trim().toLowerCase();
  const matching = filter ? items.filter(
      (item) => text(item).toLowerCase().includes(filter)) : items;
  const pages = Math.max(1, Math.ceil(matching.length / PAGE));
  paging[kind] = Math.min(paging[kind], pages - 1);
  const start = paging[kind] * PAGE;
  const shown = matching.slice(start, start + PAGE);
  $(kind + "s").replaceChildren(...shown.map(toRow));
  $(kind + "-page").textContent = matching.length === 0 ? " none " :
      " " + (start + 1) + "-" + (start + shown.length) + " of " +
      matching.length + " ";
}

function render(s) {
  last = s;
  $("job").textContent = s.job_id;
  $("command").textContent = s.command.join(" ");
  $("state").textContent = s.state;
  $("generation").textContent = s.generation;
  $("world").textContent = s.world_size;
  $("restarts").textContent = s.restarts_used + " used, " +
      Math.max(0, s.max_restarts - s.restarts_used) + " left";
  $("uptime").textContent = seconds(s.uptime_s);
  $("machine-summary").textContent =
      s.nodes.length + " of " + s.num_machines + " machines: " +
      counts(s.nodes);
  $("rank-summary").textContent = s.ranks.length + " ranks: " +
      counts(s.ranks);
  showPage("machine", s.nodes,
      (n) => [n.machine_rank, n.hostname, n.address, n.state].join(" "),
      (n) => row(n.machine_rank, n.hostname, n.address, n.state,
                 seconds(n.last_heartbeat_age_s) + " ago" +
                     (n.heartbeat_via ? " (" + n.heartbeat_via + ")" : ""),
                 n.workers));
  showPage("rank", s.ranks,
      (r) => ["rank " + r.rank, "machine " + r.machine_rank, r.state].join(" "),
      (r) => row(r.rank, r.local_rank, r.machine_rank, r.pid, r.state,
                 exitText(r)));
  const failures = s.failures.slice(-MAX_FAILURES).map((f) => el("div",
      el("b", "generation " + f.generation + ": "), f.reason,
      el("pre", f.last_lines.join("\n"))));
  if (s.failures.length > MAX_FAILURES) {
    failures.unshift(el("div", (s.failures.length - MAX_FAILURES) +
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

async function refresh() {
  try {
    const reply = await fetch("api/status", {cache: "no-store"});
    if (!reply.ok) throw new Error("HTTP " + reply.status);
    render(await reply.json());
    $("updated").textContent = "updated " + new Date().toLocaleTimeString();
    $("updated").className = "muted";
  } catch (e) {
    $("updated").textContent = "cannot reach the coordinator (" + e.message +
        "); showing the last status";
    $("updated").className = "bad";
  }
  setTimeout(refresh, 1000);
}
for (const kind of ["machine", "rank"]) {
  $(kind + "-filter").addEventListener("input", () => {
    paging[kind] = 0;
    if (last) render(last);
  });
  $(kind + "-prev").addEventListener("click", () => {
    paging[kind] = Math.max(0, paging[kind] - 1);
    if (last) render(last);
  });
  $(kind + "-next").addEventListener("click", () => {
    paging[kind] += 1;
    if (last) render(last);
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

std::string StatusPageSecurityPolicy(const std::string& nonce) {
  return absl::StrCat("default-src 'none'; script-src 'nonce-", nonce,
                      "'; style-src 'nonce-", nonce,
                      "'; connect-src 'self'; img-src 'none'; base-uri "
                      "'none'; form-action 'none'; frame-ancestors 'none'");
}

}  // namespace trl
