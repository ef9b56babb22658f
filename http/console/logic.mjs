// The web console's logic, apart from the page: parsing the Prometheus text
// of /metrics, counters into rates, histograms into percentiles, partition
// cells into states, rebalance estimates, the health banner, and number
// formats.  Pure functions and small value classes, no DOM and no network:
// app.mjs (the page) imports them, and so do the tests
// (tests/console/logic.test.mjs, `node --test`).

// ---------------------------------------------------------------- /metrics

// Parses the Prometheus text exposition format 0.0.4.  Returns
// {types: {family: "counter"|...}, samples: [{name, labels, value}]}.
// Lines it cannot read are skipped (counted in `skipped`), never thrown on:
// the page must keep drawing whatever else the node sent.
export function parseProm(text) {
  const types = {};
  const samples = [];
  let skipped = 0;
  for (const raw of String(text).split('\n')) {
    const line = raw.trim();
    if (!line) continue;
    if (line.startsWith('#')) {
      const m = /^#\s*TYPE\s+([a-zA-Z_:][a-zA-Z0-9_:]*)\s+(\w+)/.exec(line);
      if (m) types[m[1]] = m[2];
      continue;
    }
    const s = parseSample(line);
    if (s) samples.push(s);
    else skipped++;
  }
  return { types, samples, skipped };
}

function parseSample(line) {
  const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)/.exec(line);
  if (!m) return null;
  const name = m[1];
  let i = name.length;
  const labels = {};
  if (line[i] === '{') {
    i++;
    for (;;) {
      while (line[i] === ' ' || line[i] === ',') i++;
      if (line[i] === '}') { i++; break; }
      const k = /^([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"/.exec(line.slice(i));
      if (!k) return null;
      i += k[0].length;
      let v = '';
      for (;;) {
        if (i >= line.length) return null;
        const c = line[i++];
        if (c === '"') break;
        if (c === '\\') {
          const e = line[i++];
          v += e === 'n' ? '\n' : e;
        } else {
          v += c;
        }
      }
      labels[k[1]] = v;
    }
  }
  const rest = line.slice(i).trim().split(/\s+/);
  if (!rest[0]) return null;
  const value = parseValue(rest[0]);
  if (Number.isNaN(value) && rest[0] !== 'NaN') return null;
  return { name, labels, value };
}

function parseValue(s) {
  if (s === '+Inf' || s === 'Inf') return Infinity;
  if (s === '-Inf') return -Infinity;
  if (s === 'NaN') return NaN;
  if (!/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(s)) return NaN;
  return Number(s);
}

// True when every label of `want` is on the sample with that value.
function matches(sample, want) {
  for (const k in want) if (sample.labels[k] !== want[k]) return false;
  return true;
}

// The sum of every sample `name` whose labels include `want`; null when none.
export function metric(parsed, name, want = {}) {
  let sum = null;
  for (const s of parsed.samples)
    if (s.name === name && matches(s, want)) sum = (sum ?? 0) + s.value;
  return sum;
}

// ------------------------------------------------------------------- rates

// The per-second rate of a counter between two readings: null when either
// is missing or no time passed.  A counter that went down was reset (the
// node restarted): what it counted since is the increase, as Prometheus's
// rate() takes it.
export function counterRate(prev, cur, dtSeconds) {
  if (prev == null || cur == null || !(dtSeconds > 0)) return null;
  const inc = cur >= prev ? cur - prev : cur;
  return inc / dtSeconds;
}

// The q-quantile (0..1) of the observations between two readings of a
// histogram: buckets are [{le, count}] cumulative as /metrics gives them.
// Linear inside a bucket (histogram_quantile's rule); null when nothing was
// observed between the readings.  The +Inf bucket answers with the highest
// finite bound.
export function histogramQuantile(prevBuckets, curBuckets, q) {
  const prev = new Map((prevBuckets || []).map((b) => [b.le, b.count]));
  const b = curBuckets
    .map((x) => {
      const p = prev.get(x.le) ?? 0;
      return { le: x.le, count: x.count >= p ? x.count - p : x.count };
    })
    .sort((x, y) => x.le - y.le);
  if (!b.length) return null;
  const total = b[b.length - 1].count;
  if (!(total > 0)) return null;
  const rank = q * total;
  let lower = 0, below = 0;
  for (const x of b) {
    if (x.count >= rank) {
      if (x.le === Infinity) return lower;
      const inBucket = x.count - below;
      return inBucket > 0 ? lower + (x.le - lower) * ((rank - below) / inBucket) : x.le;
    }
    lower = x.le;
    below = x.count;
  }
  return lower;
}

// The buckets of histogram `name` (the _bucket samples) with labels `want`,
// summed over the other labels: [{le, count}].
export function histogramBuckets(parsed, name, want = {}) {
  const by = new Map();
  for (const s of parsed.samples) {
    if (s.name !== name + '_bucket' || !matches(s, want)) continue;
    const le = parseValue(s.labels.le);
    by.set(le, (by.get(le) ?? 0) + s.value);
  }
  return [...by.entries()].map(([le, count]) => ({ le, count })).sort((a, b) => a.le - b.le);
}

// A time series of the last `keepMs` milliseconds: points {t, v}, v may be
// null (a gap).
export class Series {
  constructor(keepMs) {
    this.keepMs = keepMs;
    this.points = [];
  }
  push(t, v) {
    this.points.push({ t, v });
    while (this.points.length && this.points[0].t < t - this.keepMs) this.points.shift();
  }
  last() {
    for (let i = this.points.length - 1; i >= 0; i--) if (this.points[i].v != null) return this.points[i].v;
    return null;
  }
  max() {
    let m = null;
    for (const p of this.points) if (p.v != null && (m == null || p.v > m)) m = p.v;
    return m;
  }
}

// What the charts plot from two consecutive /metrics readings (parsed, with
// their times in ms): ops/s, hit ratio (0..1), memory, RESP clients, CPU
// and latency percentiles (seconds).  Null where a reading lacks the figure
// or, for rates, where there is no previous reading.
export function chartPoint(prev, cur, dtMs) {
  const dt = dtMs / 1000;
  const p = prev || { samples: [] };
  const ops = counterRate(prev ? metric(p, 'lattice_operations_total') : null, metric(cur, 'lattice_operations_total'), dt);
  const hits = counterRate(prev ? metric(p, 'lattice_cache_hits_total') : null, metric(cur, 'lattice_cache_hits_total'), dt);
  const misses = counterRate(prev ? metric(p, 'lattice_cache_misses_total') : null, metric(cur, 'lattice_cache_misses_total'), dt);
  const lookups = hits != null && misses != null ? hits + misses : null;
  const prevB = prev ? histogramBuckets(p, 'lattice_operation_duration_seconds') : null;
  const curB = histogramBuckets(cur, 'lattice_operation_duration_seconds');
  const q = (x) => (prev && curB.length ? histogramQuantile(prevB, curB, x) : null);
  return {
    ops,
    hitRatio: lookups > 0 ? hits / lookups : null,
    rss: metric(cur, 'lattice_memory_rss_bytes'),
    regionBytes: regionBytes(cur),
    respClients: metric(cur, 'lattice_resp_clients'),
    cpu: metric(cur, 'lattice_cpu_load'),
    p50: q(0.5),
    p99: q(0.99),
  };
}

function regionBytes(parsed) {
  const pages = metric(parsed, 'lattice_region_pages', { state: 'data' });
  const size = metric(parsed, 'lattice_region_page_size_bytes');
  return pages != null && size != null ? pages * size : null;
}

// -------------------------------------------------------------- partitions

// A partition's cell state, from its entry in /partitions (owners with role
// and state, "redundancy"): "lost" (no serving primary), "moving" (a copy is
// being loaded), "under" (fewer serving copies than wanted), or "owning"
// (every copy wanted serves).
export function cellState(p) {
  if (!p || p.state === 'LOST' || p.redundancy === 'lost') return 'lost';
  if ((p.owners || []).some((o) => o.state === 'MOVING')) return 'moving';
  if (p.redundancy === 'under') return 'under';
  return 'owning';
}

export const CELL_STATES = ['owning', 'under', 'moving', 'lost'];

// Counts of cell states over one /partitions answer.
export function cellCounts(parts) {
  const c = { owning: 0, under: 0, moving: 0, lost: 0 };
  for (const p of (parts && parts.partitions) || []) c[cellState(p)]++;
  return c;
}

// The hover text of a cell: its owners (primary first) and their states.
export function cellTitle(p) {
  const owners = (p.owners || []).map((o) => `${o.role} ${o.consistent_id || o.node} ${o.state}`);
  return `partition ${p.id}: ${cellState(p)}\n` + (owners.length ? owners.join('\n') : 'no owner');
}

// Whether the partition maps may have changed since they were fetched: a
// new topology version (prevVersion: "major.minor" then), a rebalance
// running, a node that does not serve, a map not all owning.  The maps cost
// the node the most to build (~300 KB of JSON for 1024 partitions), so the
// page fetches them every poll only then, and seldom otherwise.
export function mapsMayChange(prevVersion, topology, rebalance, health, partsByCache) {
  const v = topology ? topology.topology_version.join('.') : null;
  if (v !== prevVersion) return true;
  if (rebalance && rebalance.in_progress) return true;
  if (!health || !health.serving) return true;
  return Object.values(partsByCache || {}).some((p) => !p || cellCounts(p).owning !== (p.partitions || []).length);
}

// --------------------------------------------------------------- rebalance

// The estimate of one cache's rebalance from what the page watched:
// samples [{t (ms), left (partitions), total}], oldest first.  Seconds
// left at the rate partitions completed while watched; 0 when none are
// left; null while unknown (nothing completed yet, or a new rebalance - more
// left than before - just began).
export function eta(samples) {
  if (!samples || !samples.length) return null;
  const last = samples[samples.length - 1];
  if (!(last.left > 0)) return 0;
  // the watch of the current rebalance: from after the last increase of left
  let from = 0;
  for (let i = 1; i < samples.length; i++) if (samples[i].left > samples[i - 1].left) from = i;
  const first = samples[from];
  const done = first.left - last.left;
  const dt = (last.t - first.t) / 1000;
  if (done <= 0 || dt <= 0) return null;
  return last.left * (dt / done);
}

// A cache's rebalance line from /rebalance ("caches" entry) and the page's
// own samples: percent done, left, total, and the estimate (the page's,
// else the node's eta_s when it has one).
export function rebalanceView(c, samples) {
  const total = c.partitions_total ?? 0;
  const left = c.partitions_left ?? 0;
  const mine = eta(samples);
  const theirs = typeof c.eta_s === 'number' && c.eta_s >= 0 ? c.eta_s : null;
  return {
    name: c.name,
    total,
    left,
    percent: total > 0 ? (100 * (total - left)) / total : 100,
    eta: mine ?? (left > 0 ? theirs : 0),
  };
}

// ------------------------------------------------------------------ health

// The banner: "error" with the reasons when the node does not serve (a
// lost quorum, partitions without a serving copy), "warn" when it serves
// with under-replicated partitions or a node silent, else "ok".
export function banner(health, overview) {
  if (!health) return { level: 'error', text: 'no answer from the node' };
  if (!health.serving) return { level: 'error', text: (health.reasons || []).join('; ') || `status ${health.status}` };
  const warn = [];
  if (overview && overview.under > 0) warn.push(`${overview.under} partitions under-replicated`);
  if (overview && overview.moving > 0) warn.push(`${overview.moving} partitions moving`);
  if (overview && overview.silent > 0) warn.push(`${overview.silent} node${overview.silent > 1 ? 's' : ''} silent`);
  if (warn.length) return { level: 'warn', text: warn.join('; ') };
  return { level: 'ok', text: 'serving' };
}

// The overview's counts from /topology and every cache's /partitions.
export function overview(topology, partsByCache) {
  const nodes = (topology && topology.nodes) || [];
  const o = {
    servers: nodes.filter((n) => n.role === 'server').length,
    clients: nodes.filter((n) => n.role === 'client').length,
    silent: nodes.filter((n) => n.state === 'silent').length,
    caches: 0,
    partitions: 0,
    owning: 0,
    under: 0,
    moving: 0,
    lost: 0,
  };
  for (const parts of Object.values(partsByCache || {})) {
    if (!parts) continue;
    o.caches++;
    const c = cellCounts(parts);
    o.partitions += (parts.partitions || []).length;
    for (const k of CELL_STATES) o[k] += c[k];
  }
  return o;
}

// ----------------------------------------------------------------- formats

export function fmtBytes(v) {
  if (v == null || Number.isNaN(v)) return '-';
  const u = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (Math.abs(v) >= 1024 && i < u.length - 1) { v /= 1024; i++; }
  return i === 0 ? `${Math.round(v)} B` : `${v.toFixed(1)} ${u[i]}`;
}

export function fmtCount(v) {
  if (v == null || Number.isNaN(v)) return '-';
  const u = ['', 'k', 'M', 'G', 'T'];
  let i = 0;
  while (Math.abs(v) >= 1000 && i < u.length - 1) { v /= 1000; i++; }
  return i === 0 ? `${Math.round(v * 10) / 10}` : `${v.toFixed(1)}${u[i]}`;
}

export function fmtDuration(ms) {
  if (ms == null || Number.isNaN(ms)) return '-';
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

export function fmtSeconds(s) {
  if (s == null || Number.isNaN(s)) return '?';
  if (s > 0 && s < 1) return '<1s';
  return fmtDuration(s * 1000);
}

export function fmtLatency(seconds) {
  if (seconds == null) return '-';
  if (seconds < 1e-3) return `${Math.round(seconds * 1e6)} µs`;
  if (seconds < 1) return `${(seconds * 1e3).toFixed(1)} ms`;
  return `${seconds.toFixed(2)} s`;
}
