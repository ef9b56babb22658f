// The web console's page: polls the node that served it (and nothing else)
// every 2 s, keeps the last minutes of its figures, and draws the views.
// The logic it applies lives in logic.mjs (tested with `node --test`).
import {
  parseProm, chartPoint, Series, cellState, cellTitle, rebalanceView, banner, overview, mapsMayChange,
  fmtBytes, fmtCount, fmtDuration, fmtSeconds, fmtLatency,
} from './logic.mjs';

const POLL_MS = 2000;
const KEEP_MS = 10 * 60 * 1000;   // the charts' window
const TIMEOUT_MS = 10000;         // a page the node does not answer in time counts as missing

const $ = (id) => document.getElementById(id);

// ------------------------------------------------------------------- state

const st = {
  view: 'overview',
  health: null, topology: null, caches: null, rebalance: null, slowlog: null,
  parts: {},                      // cache name -> /partitions answer
  partsAt: 0, cachesAt: 0,        // when they were fetched last
  metrics: null, metricsAt: 0,
  rebalSamples: {},               // cache name -> [{t, left, total}]
  errors: {},                     // page -> last error text
  lastOk: 0,
};

const SERIES = [
  { key: 'ops', title: 'operations/s', fmt: fmtCount },
  { key: 'hitRatio', title: 'hit ratio', fmt: (v) => (v == null ? '-' : `${(v * 100).toFixed(1)}%`), max: 1 },
  { key: 'p50', title: 'latency p50', fmt: fmtLatency },
  { key: 'p99', title: 'latency p99', fmt: fmtLatency },
  { key: 'rss', title: 'memory (RSS)', fmt: fmtBytes },
  { key: 'regionBytes', title: 'data region in use', fmt: fmtBytes },
  { key: 'respClients', title: 'RESP clients', fmt: fmtCount },
  { key: 'cpu', title: 'CPU (1.0 = one core)', fmt: (v) => (v == null ? '-' : v.toFixed(2)) },
];
const series = Object.fromEntries(SERIES.map((s) => [s.key, new Series(KEEP_MS)]));

// --------------------------------------------------------------- fetching

// GET path from the node as JSON or text; null when it did not answer
// well (the reason kept in st.errors for the status line).  Never throws.
async function get(path, text = false) {
  const ctl = new AbortController();
  const timer = setTimeout(() => ctl.abort(), TIMEOUT_MS);
  try {
    const r = await fetch(path, { signal: ctl.signal, cache: 'no-store' });
    const body = text ? await r.text() : await r.json();
    if (!r.ok) {
      st.errors[path] = `${r.status} ${(body && body.error) || ''}`.trim();
      return null;
    }
    delete st.errors[path];
    return body;
  } catch (e) {
    st.errors[path] = e && e.name === 'AbortError' ? 'no answer in time' : 'no answer';
    return null;
  } finally {
    clearTimeout(timer);
  }
}

// Whether a page last fetched at `at` is due again: every poll while it
// may be changing, else every SLOW_MS.
const SLOW_MS = 10000;
const due = (at, changing, t) => changing || t - at >= SLOW_MS;

async function poll() {
  const t = Date.now();
  const version = st.topology ? st.topology.topology_version.join('.') : null;
  const wantCaches = !st.caches || st.view === 'caches' || due(st.cachesAt, false, t);
  const [health, topology, caches, rebalance, metricsText] = await Promise.all([
    get('/health?format=json'), get('/topology'), wantCaches ? get('/caches') : null, get('/rebalance'),
    get('/metrics', true),
  ]);
  st.health = health;
  if (topology) st.topology = topology;
  if (caches) { st.caches = caches; st.cachesAt = t; }
  if (rebalance) st.rebalance = rebalance;
  const names = st.caches ? st.caches.caches.map((c) => c.name) : [];
  const wantMaps = names.some((n) => !st.parts[n]) ||
    due(st.partsAt, mapsMayChange(version, st.topology, st.rebalance, st.health, st.parts), t);
  if (wantMaps) {
    const parts = await Promise.all(names.map((n) => get(`/partitions?cache=${encodeURIComponent(n)}`)));
    const next = {};
    names.forEach((n, i) => { next[n] = parts[i] || st.parts[n] || null; });
    st.parts = next;
    st.partsAt = t;
  }
  if (st.view === 'slowlog') st.slowlog = await get('/slowlog?count=128');
  if (metricsText != null) {
    const m = parseProm(metricsText);
    const pt = chartPoint(st.metrics, m, t - st.metricsAt);
    for (const s of SERIES) series[s.key].push(t, pt[s.key]);
    st.metrics = m;
    st.metricsAt = t;
  }
  if (st.rebalance) {
    for (const c of st.rebalance.caches || []) {
      const s = (st.rebalSamples[c.name] ||= []);
      s.push({ t, left: c.partitions_left, total: c.partitions_total });
      while (s.length > 300) s.shift();
    }
  }
  if (health || topology) st.lastOk = t;
}

// ------------------------------------------------------------------ views

function el(tag, cls, text) {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text != null) e.textContent = text;
  return e;
}

function row(cells) {
  const tr = el('tr');
  for (const c of cells) {
    const td = el('td', c.cls, c.text);
    if (c.title) td.title = c.title;
    tr.appendChild(td);
  }
  return tr;
}

function fill(tbody, rows) {
  tbody.replaceChildren(...rows);
}

const nameOf = (id) => {
  const n = st.topology && st.topology.nodes.find((x) => x.id === id);
  return n ? n.consistent_id : id;
};

function drawHeader(ov) {
  const t = st.topology;
  $('cluster').textContent = (t && t.cluster) || '-';
  $('version').textContent = t ? t.topology_version.join('.') : '-';
  $('coordinator').textContent = t ? nameOf(t.coordinator) : '-';
  $('self').textContent = t ? nameOf(t.self) : '-';
  const b = banner(st.health, ov);
  const ban = $('banner');
  ban.className = `banner ${b.level}`;
  ban.dataset.level = b.level;
  ban.textContent = b.level === 'ok' ? 'The grid serves: every partition has its copies.' : b.text;
  const errs = Object.entries(st.errors);
  $('poll-status').textContent = st.lastOk
    ? `updated ${new Date(st.lastOk).toLocaleTimeString()}` + (errs.length ? ` · ${errs.length} page${errs.length > 1 ? 's' : ''} unanswered` : '')
    : 'no answer from the node yet';
  $('poll-status').title = errs.map(([p, e]) => `${p}: ${e}`).join('\n');
}

function drawOverview(ov) {
  const h = st.health;
  $('ov-health').textContent = h ? (h.serving ? 'serving' : 'not serving') : '-';
  $('ov-health').className = `v ${h && !h.serving ? 'bad' : ''}`;
  const q = st.topology && st.topology.quorum;
  $('ov-quorum').textContent = q ? `${q.has_quorum ? 'held' : 'LOST'} ${q.baseline_in_topology}/${q.baseline_nodes}` : '-';
  $('ov-quorum').className = `v ${q && !q.has_quorum ? 'bad' : ''}`;
  $('ov-servers').textContent = ov.servers;
  $('ov-clients').textContent = ov.clients;
  $('ov-caches').textContent = ov.caches;
  $('ov-partitions').textContent = ov.partitions;
  for (const k of ['under', 'moving', 'lost']) {
    $(`ov-${k}`).textContent = ov[k];
    $(`ov-${k}`).className = `v ${ov[k] ? (k === 'lost' ? 'bad' : 'warn') : ''}`;
  }
  const r = st.rebalance;
  $('ov-rebalance').textContent = r ? (r.in_progress ? 'in progress' : 'idle') : '-';
  drawMaps($('ov-maps'), false);
}

function drawNodes() {
  const t = st.topology;
  const nodes = t ? t.nodes : [];
  fill($('nodes').tBodies[0], nodes.map((n) => {
    const tr = row([
      { text: n.id === t.coordinator ? '\u2605' : '', title: n.id === t.coordinator ? 'coordinator' : '' },
      { text: n.consistent_id },
      { text: n.id.slice(0, 8), title: n.id },
      { text: n.state, cls: `state-${n.state}` },
      { text: n.role },
      { text: String(n.order), cls: 'n' },
      { text: n.addr },
      { text: fmtDuration(n.uptime_ms), cls: 'n' },
      { text: n.cpu_load == null ? '-' : `${(n.cpu_load * 100).toFixed(1)}%`, cls: 'n' },
      { text: fmtBytes(n.memory_rss_bytes), cls: 'n' },
      { text: n.self ? 'this node' : `${(n.silent_ms / 1000).toFixed(1)} s ago`, cls: 'n' },
    ]);
    tr.dataset.node = n.consistent_id;
    tr.dataset.state = n.state;
    if (n.self) tr.classList.add('self');
    return tr;
  }));
  if (st.view === 'nodes') drawCharts($('node-charts'), ['ops', 'cpu', 'rss', 'p99']);
}

// One partition map per cache: a cell per partition (data-state for the
// colour, the owners on hover) and primaries/backups per node as bars.
function drawMaps(box, bars) {
  const names = Object.keys(st.parts);
  for (const m of [...box.children]) if (!names.includes(m.dataset.cache)) m.remove();
  for (const name of names) {
    const p = st.parts[name];
    if (!p) continue;
    let m = [...box.children].find((x) => x.dataset.cache === name);
    if (!m) {
      m = el('div', 'map');
      m.dataset.cache = name;
      m.append(el('div', 'title'), el('div', 'cells'), el('div', 'bars'));
      box.appendChild(m);
    }
    const [title, cells, barBox] = m.children;
    const counts = { owning: 0, under: 0, moving: 0, lost: 0 };
    const parts = p.partitions || [];
    while (cells.children.length > parts.length) cells.lastChild.remove();
    while (cells.children.length < parts.length) cells.appendChild(el('i', 'cell'));
    parts.forEach((x, i) => {
      const s = cellState(x);
      counts[s]++;
      const c = cells.children[i];
      if (c.dataset.state !== s) c.dataset.state = s;
      c.dataset.tip = cellTitle(x);
    });
    title.replaceChildren(el('b', null, name),
      el('span', null, `${parts.length} partitions · topology ${(p.topology_version || []).join('.')} · copies wanted ${p.copies_wanted}`),
      el('span', null, `owning ${counts.owning} · under-replicated ${counts.under} · moving ${counts.moving} · lost ${counts.lost}`));
    barBox.hidden = !bars;
    if (bars) {
      const nodes = p.nodes || [];
      const most = Math.max(1, ...nodes.map((n) => n.primaries + n.backups));
      barBox.replaceChildren(...nodes.flatMap((n) => {
        const bar = el('div', 'bar');
        const pi = el('i', 'p');
        const bi = el('i', 'b');
        pi.style.width = `${(100 * n.primaries) / most}%`;
        bi.style.width = `${(100 * n.backups) / most}%`;
        bar.append(pi, bi);
        return [el('span', null, n.consistent_id), bar, el('span', null, `${n.primaries} primaries, ${n.backups} backups`)];
      }));
    }
  }
}

function drawRebalance() {
  const r = st.rebalance;
  $('rebalance-state').textContent = r
    ? (r.in_progress ? 'A rebalance is in progress.' : 'No rebalance runs: every partition is where the assignment wants it.')
    : 'no answer from /rebalance';
  $('rebalance-state').dataset.inProgress = r && r.in_progress ? 'true' : 'false';
  const caches = (r && r.caches) || [];
  fill($('rebalance').tBodies[0], caches.map((c) => {
    const v = rebalanceView(c, st.rebalSamples[c.name]);
    const bar = el('div', 'progress');
    const fillBar = el('i');
    fillBar.style.width = `${v.percent.toFixed(1)}%`;
    bar.appendChild(fillBar);
    const tr = row([
      { text: c.name },
      { text: '' },
      { text: String(v.left), cls: 'n' },
      { text: String(v.total), cls: 'n' },
      { text: fmtCount(c.entries_received), cls: 'n' },
      { text: fmtBytes(c.bytes_received), cls: 'n' },
      { text: `${fmtBytes(c.bytes_per_s)}/s`, cls: 'n' },
      { text: v.left > 0 ? fmtSeconds(v.eta) : '-', cls: 'n' },
    ]);
    tr.children[1].appendChild(bar);
    tr.dataset.cache = c.name;
    tr.dataset.left = String(v.left);
    tr.dataset.total = String(v.total);
    return tr;
  }));
  fill($('rebalance-nodes').tBodies[0], ((r && r.nodes) || []).map((n) => row([
    { text: n.consistent_id || n.id },
    { text: n.mode },
    { text: fmtCount(n.entries_received), cls: 'n' },
    { text: fmtBytes(n.bytes_received), cls: 'n' },
    { text: String(n.partitions_full), cls: 'n' },
    { text: String(n.partitions_delta), cls: 'n' },
  ])));
}

function drawCaches() {
  const box = $('caches');
  const caches = (st.caches && st.caches.caches) || [];
  box.replaceChildren(...caches.map((c) => {
    const d = el('div');
    d.append(el('h3', null, `${c.name}: ${c.mode}, ${c.partitions} partitions, backups ${c.backups}, ${c.sync}, ${fmtCount(c.size)} entries`));
    const t = el('table');
    const hr = t.createTHead().insertRow();
    ['node', 'primary entries', 'backup entries', 'primary partitions', 'backup partitions', 'moving', 'reads',
      'writes', 'hits', 'misses', 'hit ratio', 'bytes'].forEach((h, i) => hr.appendChild(el('th', i ? 'n' : '', h)));
    const body = t.createTBody();
    for (const n of c.nodes) {
      const look = n.hits + n.misses;
      body.appendChild(row([
        { text: n.consistent_id },
        ...[n.primary_entries, n.backup_entries, n.primary_partitions, n.backup_partitions, n.moving_partitions,
          n.reads, n.writes, n.hits, n.misses].map((v) => ({ text: fmtCount(v), cls: 'n' })),
        { text: look ? `${((100 * n.hits) / look).toFixed(1)}%` : '-', cls: 'n' },
        { text: fmtBytes(n.bytes), cls: 'n' },
      ]));
    }
    d.append(t);
    return d;
  }));
}

// A line chart of one series on a canvas: the last KEEP_MS, newest right.
function drawChart(canvas, s, spec) {
  const dpr = window.devicePixelRatio || 1;
  const w = canvas.clientWidth || 360, h = canvas.clientHeight || 120;
  if (canvas.width !== Math.round(w * dpr)) canvas.width = Math.round(w * dpr);
  if (canvas.height !== Math.round(h * dpr)) canvas.height = Math.round(h * dpr);
  const g = canvas.getContext('2d');
  g.setTransform(dpr, 0, 0, dpr, 0, 0);
  g.clearRect(0, 0, w, h);
  g.strokeStyle = '#e3e6ea';
  g.lineWidth = 1;
  for (let i = 0; i <= 4; i++) {
    const y = Math.round(4 + ((h - 8) * i) / 4) + 0.5;
    g.beginPath(); g.moveTo(0, y); g.lineTo(w, y); g.stroke();
  }
  const pts = s.points;
  if (!pts.length) return;
  const now = pts[pts.length - 1].t;
  // The x axis: the data the page holds, at least a minute, at most KEEP_MS.
  const span = Math.min(KEEP_MS, Math.max(60000, now - pts[0].t));
  const top = spec.max ?? Math.max(1e-9, (s.max() || 0) * 1.15);
  g.strokeStyle = '#1d3557';
  g.lineWidth = 1.5;
  g.beginPath();
  let pen = false;
  for (const p of pts) {
    if (p.v == null) { pen = false; continue; }
    const x = w - ((now - p.t) / span) * w;
    const y = h - 4 - ((h - 8) * Math.min(p.v, top)) / top;
    if (pen) g.lineTo(x, y); else g.moveTo(x, y);
    pen = true;
  }
  g.stroke();
  g.fillStyle = '#66707d';
  g.font = '11px system-ui, sans-serif';
  g.fillText(spec.fmt(top), 4, 14);
  g.fillText(`last ${fmtDuration(span)}`, 4, h - 6);
}

function drawCharts(box, keys) {
  for (const key of keys) {
    const spec = SERIES.find((x) => x.key === key);
    let c = [...box.children].find((x) => x.dataset.series === key);
    if (!c) {
      c = el('div', 'chart');
      c.dataset.series = key;
      const head = el('div', 'head');
      head.append(el('span', null, spec.title), el('b'));
      c.append(head, el('canvas'));
      box.appendChild(c);
    }
    c.querySelector('.head b').textContent = spec.fmt(series[key].last());
    drawChart(c.querySelector('canvas'), series[key], spec);
  }
}

function drawSlowlog() {
  const s = st.slowlog;
  $('slowlog-state').textContent = !s
    ? 'no answer from /slowlog'
    : s.source == null
      ? 'This node keeps no slow log (it serves no RESP port).'
      : `${s.len} entries kept (at most ${s.max_len}); commands slower than ${s.slower_than_us} µs are logged (CONFIG SET slowlog-log-slower-than).`;
  fill($('slowlog').tBodies[0], ((s && s.entries) || []).map((e) => row([
    { text: String(e.id), cls: 'n' },
    { text: new Date(e.time * 1000).toLocaleString() },
    { text: fmtLatency(e.duration_us / 1e6), cls: 'n' },
    { text: e.argv.join(' '), cls: 'cmd' },
    { text: e.client },
    { text: e.client_name },
  ])));
}

// Every view follows every poll, shown or not (a switch of tab shows the
// state of now at once); the charts only draw while theirs is shown.
function draw() {
  const ov = overview(st.topology, st.parts);
  drawHeader(ov);
  drawOverview(ov);
  drawNodes();
  drawMaps($('maps'), true);
  drawRebalance();
  drawCaches();
  drawSlowlog();
  if (st.view === 'charts') drawCharts($('charts'), SERIES.map((s) => s.key));
}

// ------------------------------------------------------------- navigation

function show(view) {
  if (!document.getElementById(`view-${view}`)) view = 'overview';
  st.view = view;
  for (const v of document.querySelectorAll('.view')) v.classList.toggle('active', v.id === `view-${view}`);
  for (const a of document.querySelectorAll('#tabs a')) a.classList.toggle('active', a.dataset.view === view);
  document.body.dataset.view = view;
  if (view === 'slowlog' && !st.slowlog) get('/slowlog?count=128').then((s) => { st.slowlog = s; draw(); });
  draw();
}

// A cell's owners on hover (one listener for every map).
function tips() {
  const tip = $('tip');
  document.addEventListener('mouseover', (e) => {
    const c = e.target.closest && e.target.closest('.cell[data-tip]');
    if (!c) { tip.hidden = true; return; }
    tip.textContent = c.dataset.tip;
    tip.hidden = false;
  });
  document.addEventListener('mousemove', (e) => {
    if (tip.hidden) return;
    tip.style.left = `${e.clientX + 12}px`;
    tip.style.top = `${e.clientY + 12}px`;
  });
}

// One poll at a time: a slow node is asked again only after it answered.
async function loop() {
  const started = Date.now();
  await poll();
  draw();
  document.body.dataset.polls = String(Number(document.body.dataset.polls || 0) + 1);
  setTimeout(loop, Math.max(0, POLL_MS - (Date.now() - started)));
}

window.addEventListener('hashchange', () => show(location.hash.slice(1)));
tips();
show(location.hash.slice(1) || 'overview');
loop();
