// groupcoord's live web view: plain JS, no build step. Each view long-polls its JSON endpoint with
// ?wait=<version>: the server answers at once the first time, then as soon as the coordinator changed.
"use strict";

const PAGE = 50;
const MIN_POLL_MS = 500;
const main = document.getElementById("main");
const live = document.getElementById("live");
const crumb = document.getElementById("crumb");
let abort = null;      // the current view's long poll
let listState = { offset: 0, q: "", state: "", type: "" };
let groupRows = 200;   // members and partitions listed on a group's page ("show all" raises it)

function esc(v) {
  return String(v ?? "").replace(/[&<>"']/g, c => ({ "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c]));
}
function num(v) { return v === null || v === undefined ? '<span class="muted">-</span>' : esc(v.toLocaleString("en-US")); }
function badge(state) { return state ? `<span class="badge s-${esc(state)}">${esc(state)}</span>` : ""; }
function short(id) { return id && id.length > 12 ? id.slice(0, 8) + "…" : (id || ""); }
function tps(m) {
  const out = Object.entries(m || {}).map(([t, ps]) => `<span class="tp">${esc(t)}:${esc(ps.join(","))}</span>`);
  return out.length ? out.join(" ") : '<span class="muted">-</span>';
}
function clock(ms) { return new Date(ms).toLocaleTimeString("en-GB", { hour12: false }) + "." + String(ms % 1000).padStart(3, "0"); }

async function getJSON(url, signal) {
  const headers = {};
  const token = sessionStorage.getItem("groupcoord-token");
  if (token) headers["Authorization"] = "Bearer " + token;
  const r = await fetch(url, { headers, signal, cache: "no-store" });
  if (r.status === 401) { const e = new Error("unauthorized"); e.status = 401; throw e; }
  if (!r.ok) { const body = await r.json().catch(() => ({})); const e = new Error(body.error || r.statusText); e.status = r.status; throw e; }
  return r.json();
}

// Poll `url` forever (until the view changes), rendering each answer.
async function follow(urlOf, render) {
  if (abort) abort.abort();
  const ctl = abort = new AbortController();
  let version = null;
  let asked = 0;
  while (!ctl.signal.aborted) {
    // at most two requests a second: a group that changes all the time must not keep the coordinator's event
    // loop building JSON for this page
    const pause = asked + MIN_POLL_MS - Date.now();
    if (pause > 0) await new Promise(r => setTimeout(r, pause));
    asked = Date.now();
    try {
      const url = urlOf() + (version === null ? "" : `&wait=${version}`);
      const data = await getJSON(url, ctl.signal);
      if (ctl.signal.aborted) return;
      version = data.version;
      render(data);
      live.className = "live on";
      live.textContent = "live · updated " + new Date().toLocaleTimeString("en-GB", { hour12: false });
    } catch (e) {
      if (ctl.signal.aborted) return;
      live.className = "live off";
      if (e.status === 401) { showLogin(); return; }
      live.textContent = "disconnected: " + e.message;
      if (e.status === 404) { main.innerHTML = `<p class="error">${esc(e.message)}</p>`; return; }
      await new Promise(r => setTimeout(r, 1000));
      version = null;
    }
  }
}

function showLogin() {
  live.textContent = sessionStorage.getItem("groupcoord-token") ? "token refused" : "token needed";
  main.innerHTML = "";
  main.appendChild(document.getElementById("login").content.cloneNode(true));
  document.getElementById("login-form").addEventListener("submit", ev => {
    ev.preventDefault();
    sessionStorage.setItem("groupcoord-token", document.getElementById("token").value.trim());
    route();
  });
}

// --- the groups list ------------------------------------------------------------------------------------
function listURL() {
  const s = listState;
  const p = new URLSearchParams({ offset: s.offset, limit: PAGE, q: s.q, state: s.state, type: s.type });
  return "/api/groups?" + p.toString();
}

function showList() {
  crumb.textContent = "groups";
  main.innerHTML = `
    <div class="toolbar">
      <input id="q" placeholder="filter by group id" value="${esc(listState.q)}" size="28">
      <select id="type"><option value="">all types</option><option>consumer</option><option>classic</option><option>share</option><option>streams</option></select>
      <select id="state"><option value="">all states</option><option>EMPTY</option><option>ASSIGNING</option><option>RECONCILING</option><option>STABLE</option><option>PreparingRebalance</option><option>CompletingRebalance</option><option>DEAD</option></select>
      <button id="prev">‹ prev</button><span id="range" class="muted"></span><button id="next">next ›</button>
      <span id="states" class="muted"></span>
    </div>
    <table id="groups"><thead><tr><th>group</th><th>type</th><th>protocol</th><th>state</th><th class="num">members</th>
      <th class="num">group epoch</th><th class="num">target epoch</th><th>assignor</th><th class="num">total lag</th></tr></thead>
      <tbody></tbody></table>`;
  document.getElementById("type").value = listState.type;
  document.getElementById("state").value = listState.state;
  let typing = null;
  document.getElementById("q").addEventListener("input", ev => {
    clearTimeout(typing);
    typing = setTimeout(() => { listState.q = ev.target.value; listState.offset = 0; showList(); document.getElementById("q").focus(); }, 250);
  });
  for (const id of ["type", "state"]) {
    document.getElementById(id).addEventListener("change", ev => { listState[id] = ev.target.value; listState.offset = 0; showList(); });
  }
  document.getElementById("prev").addEventListener("click", () => { listState.offset = Math.max(0, listState.offset - PAGE); showList(); });
  document.getElementById("next").addEventListener("click", () => { listState.offset += PAGE; showList(); });
  follow(listURL, renderList);
}

function renderList(data) {
  const rows = data.groups.map(g => `<tr data-group="${esc(g.group_id)}">
      <td><a href="#/group/${encodeURIComponent(g.group_id)}" class="mono">${esc(g.group_id)}</a></td>
      <td>${esc(g.type)}</td><td>${esc(g.protocol) || '<span class="muted">-</span>'}</td><td>${badge(g.state)}</td>
      <td class="num">${num(g.members)}</td><td class="num">${num(g.group_epoch)}</td><td class="num">${num(g.target_epoch)}</td>
      <td>${esc(g.assignor) || '<span class="muted">-</span>'}</td><td class="num">${num(g.lag)}</td></tr>`);
  document.querySelector("#groups tbody").innerHTML = rows.join("") ||
    '<tr><td colspan="9" class="muted">no groups</td></tr>';
  const end = Math.min(data.offset + data.groups.length, data.total);
  document.getElementById("range").textContent = data.total ? `${data.offset + 1}–${end} of ${data.total}` : "0 of 0";
  document.getElementById("prev").disabled = data.offset === 0;
  document.getElementById("next").disabled = end >= data.total;
  document.getElementById("states").innerHTML = Object.entries(data.states).map(([s, n]) => `${badge(s)} ${n}`).join(" &nbsp;");
}

// --- one group ------------------------------------------------------------------------------------------
function showGroup(id) {
  crumb.innerHTML = `<a href="#/">groups</a> / <span class="mono">${esc(id)}</span>`;
  main.innerHTML = '<p class="muted">loading…</p>';
  follow(() => `/api/group?id=${encodeURIComponent(id)}&rows=${groupRows}`, g => renderGroup(g, id));
}

function assignmentCell(m) {
  // current vs target: partitions only in the target are coming (+), only in the current are going (struck
  // through); a partition pending revocation is still owned until the member releases it
  const cur = {}, tgt = m.target_assignment || {};
  for (const src of [m.assignment || {}, m.partitions_pending_revocation || {}])
    for (const [t, ps] of Object.entries(src)) cur[t] = [...(cur[t] || []), ...ps];
  const topics = [...new Set([...Object.keys(cur), ...Object.keys(tgt)])].sort();
  if (!topics.length) return '<span class="muted">-</span>';
  return topics.map(t => {
    const c = new Set(cur[t] || []), g = new Set(tgt[t] || []);
    const all = [...new Set([...c, ...g])].sort((a, b) => a - b);
    const parts = all.map(p => c.has(p) && g.has(p) ? esc(p) : g.has(p) ? `<span class="diff-add" title="in the target, not yet owned">+${esc(p)}</span>` : `<span class="diff-del" title="owned, not in the target">${esc(p)}</span>`);
    return `<span class="tp">${esc(t)}:${parts.join(",")}</span>`;
  }).join(" ");
}

function strip(timeline, nowMs) {
  if (!timeline.length) return '<p class="muted">no rebalance seen since this coordinator started</p>';
  const t0 = timeline[0].at_ms, t1 = Math.max(nowMs, timeline[timeline.length - 1].at_ms + 1);
  const W = 1000, x = t => ((t - t0) / (t1 - t0)) * W;
  const rects = timeline.map((e, i) => {
    const end = i + 1 < timeline.length ? timeline[i + 1].at_ms : t1;
    return `<rect class="s-${esc(e.state)}" x="${x(e.at_ms).toFixed(1)}" y="0" width="${Math.max(1, x(end) - x(e.at_ms)).toFixed(1)}" height="26"><title>${esc(e.state)} from ${clock(e.at_ms)}</title></rect>`;
  });
  const bumps = timeline.filter((e, i) => i > 0 && e.group_epoch !== timeline[i - 1].group_epoch)
    .map(e => `<line x1="${x(e.at_ms).toFixed(1)}" x2="${x(e.at_ms).toFixed(1)}" y1="0" y2="26"></line>`);
  return `<svg class="strip" viewBox="0 0 ${W} 26" preserveAspectRatio="none">${rects.join("")}${bumps.join("")}</svg>
    <div class="legend"><span><i class="s-STABLE"></i>STABLE</span><span><i class="s-ASSIGNING"></i>ASSIGNING</span>
    <span><i class="s-RECONCILING"></i>RECONCILING</span><span><i class="s-EMPTY"></i>EMPTY</span>
    <span>| group epoch bump</span><span>${clock(t0)} → now</span></div>`;
}

function more(shown, total, what) {
  return shown < total ? `<p class="muted">showing the first ${num(shown)} of ${num(total)} ${what} ·
    <button class="show-all">show all</button></p>` : "";
}

function renderGroup(g, id) {
  const card = (k, v) => `<div class="card"><div class="k">${k}</div><div class="v">${v}</div></div>`;
  const members = g.member_list.map(m => `<tr data-member="${esc(m.member_id)}">
      <td class="mono" title="${esc(m.member_id)}">${esc(short(m.member_id))}</td><td>${esc(m.instance_id) || '<span class="muted">-</span>'}</td>
      <td>${esc(m.client_id)}</td><td class="mono">${esc(m.client_host)}</td><td class="num">${num(m.member_epoch)}</td><td>${badge(m.state)}</td>
      <td>${assignmentCell(m)}</td><td class="pending">${tps(m.partitions_pending_revocation)}</td></tr>`);
  const parts = g.partitions.map(p => `<tr><td>${esc(p.topic)}</td><td class="num">${p.partition}</td>
      <td class="num">${num(p.committed_offset)}</td><td class="num">${num(p.log_end_offset)}</td><td class="num">${num(p.lag)}</td>
      <td class="mono" title="${esc(p.member_id)}">${esc(short(p.member_id)) || '<span class="muted">-</span>'}</td></tr>`);
  const events = [...g.timeline].reverse().map(e => `<tr><td class="mono">${clock(e.at_ms)}</td><td>${esc(e.cause)}</td>
      <td>${badge(e.previous_state)} → ${badge(e.state)}</td><td class="num">${e.group_epoch}</td><td class="num">${e.target_epoch}</td>
      <td class="num">${e.members}</td><td class="mono">${e.joined.map(j => "+" + esc(short(j))).join(" ")} ${e.left.map(j => "−" + esc(short(j))).join(" ")}</td></tr>`);
  const configsOpen = document.querySelector("details")?.open;
  const configs = (g.configs || []).map(c => `<tr><td class="mono">${esc(c.name)}</td><td class="mono">${esc(c.value)}</td><td>${c.default ? '<span class="muted">default</span>' : "override"}</td></tr>`);
  main.innerHTML = `
    <h1>${esc(g.group_id)} ${badge(g.state)}</h1>
    <div class="cards">${card("type", esc(g.type))}${card("protocol", esc(g.protocol) || "-")}${card("members", num(g.members))}
      ${card("group epoch", num(g.group_epoch))}${card("target epoch", num(g.target_epoch))}${card("assignor", esc(g.assignor) || "-")}${card("total lag", num(g.lag))}</div>
    <h2>Rebalances</h2>${strip(g.timeline, Date.now())}
    <h2>Members</h2>
    <table id="members"><thead><tr><th>member</th><th>instance</th><th>client</th><th>host</th><th class="num">epoch</th><th>state</th>
      <th>assignment (current vs target: <span class="diff-add">+coming</span> <span class="diff-del">going</span>)</th><th>pending revocation</th></tr></thead>
      <tbody>${members.join("") || '<tr><td colspan="8" class="muted">no members</td></tr>'}</tbody></table>
    ${more(g.member_list.length, g.members, "members")}
    <h2>Lag per partition</h2>
    <table id="partitions"><thead><tr><th>topic</th><th class="num">partition</th><th class="num">committed</th><th class="num">log end</th><th class="num">lag</th><th>owner</th></tr></thead>
      <tbody>${parts.join("") || '<tr><td colspan="6" class="muted">no committed offsets or owned partitions</td></tr>'}</tbody></table>
    ${more(g.partitions.length, g.partitions_total, "partitions")}
    <h2>Timeline</h2>
    <table id="timeline"><thead><tr><th>time</th><th>cause</th><th>state</th><th class="num">group epoch</th><th class="num">target epoch</th><th class="num">members</th><th>joined / left</th></tr></thead>
      <tbody>${events.join("") || '<tr><td colspan="7" class="muted">none yet</td></tr>'}</tbody></table>
    ${g.configs ? `<details><summary>Configs</summary><table id="configs"><thead><tr><th>name</th><th>value</th><th></th></tr></thead><tbody>${configs.join("")}</tbody></table></details>` : ""}`;
  if (configsOpen) document.querySelector("details").open = true;
  for (const b of main.querySelectorAll(".show-all")) b.addEventListener("click", () => { groupRows = 1000000; showGroup(id); });
}

// --- routing --------------------------------------------------------------------------------------------
function route() {
  const h = location.hash || "#/";
  groupRows = 200;
  if (h.startsWith("#/group/")) showGroup(decodeURIComponent(h.slice(8)));
  else showList();
}
window.addEventListener("hashchange", route);
route();
