// The web console's logic (http/console/logic.mjs), the module the page
// itself imports: Prometheus text parsing, counters into rates, histogram
// percentiles, partition cell states, the rebalance estimate, the banner.
// Run: node --test tests/console/logic.test.mjs (ctest -R console_logic).
import { test } from 'node:test';
import assert from 'node:assert/strict';

import {
  parseProm, metric, counterRate, histogramBuckets, histogramQuantile, chartPoint, Series, cellState, cellCounts,
  cellTitle, mapsMayChange, eta, rebalanceView, banner, overview, fmtBytes, fmtCount, fmtDuration, fmtSeconds,
  fmtLatency,
} from '../../http/console/logic.mjs';

// A /metrics excerpt in the node's own format (http/prom.c), with the
// escapes the exposition format allows in label values.
const METRICS = `# HELP lattice_up 1 while the node process runs
# TYPE lattice_up gauge
lattice_up 1
# HELP lattice_operations_total cache operations this node issued, by kind and result
# TYPE lattice_operations_total counter
lattice_operations_total{kind="get",result="ok"} 100
lattice_operations_total{kind="put",result="ok"} 50
lattice_operations_total{kind="put",result="timeout"} 2
# TYPE lattice_operation_duration_seconds histogram
lattice_operation_duration_seconds_bucket{kind="get",le="0.0001"} 10
lattice_operation_duration_seconds_bucket{kind="get",le="0.0002"} 60
lattice_operation_duration_seconds_bucket{kind="get",le="+Inf"} 100
lattice_operation_duration_seconds_sum{kind="get"} 0.02
lattice_operation_duration_seconds_count{kind="get"} 100
# TYPE lattice_cache_hits_total counter
lattice_cache_hits_total{cache="default"} 30
lattice_cache_hits_total{cache="we\\"ird\\\\name\\n"} 10
# TYPE lattice_cache_misses_total counter
lattice_cache_misses_total{cache="default"} 10
# TYPE lattice_cpu_load gauge
lattice_cpu_load 0.250
lattice_memory_rss_bytes 1.5e7
lattice_region_page_size_bytes 4096
lattice_region_pages{state="max"} 100
lattice_region_pages{state="data"} 10
lattice_resp_clients 3
`;

test('parseProm reads families, labels with escapes, and number forms', () => {
  const m = parseProm(METRICS);
  assert.equal(m.types.lattice_operations_total, 'counter');
  assert.equal(m.types.lattice_operation_duration_seconds, 'histogram');
  assert.equal(m.skipped, 0);
  const weird = m.samples.find((s) => s.name === 'lattice_cache_hits_total' && s.labels.cache !== 'default');
  assert.equal(weird.labels.cache, 'we"ird\\name\n');
  assert.equal(metric(m, 'lattice_memory_rss_bytes'), 1.5e7);
  assert.equal(metric(m, 'lattice_operations_total'), 152);
  assert.equal(metric(m, 'lattice_operations_total', { kind: 'put' }), 52);
  assert.equal(metric(m, 'lattice_operations_total', { kind: 'put', result: 'ok' }), 50);
  assert.equal(metric(m, 'lattice_nothing'), null);
  const inf = m.samples.find((s) => s.labels.le === '+Inf');
  assert.equal(inf.value, 100);
});

test('parseProm skips lines it cannot read and keeps the rest', () => {
  const m = parseProm('ok 1\nbad{x="unterminated} 2\n9starts_with_digit 3\nnovalue\nalso_ok{a="b"} 4 1700000000000\nnum abc\n');
  assert.deepEqual(m.samples.map((s) => s.name), ['ok', 'also_ok']);
  assert.equal(m.skipped, 4);
  assert.equal(metric(m, 'also_ok', { a: 'b' }), 4);
  assert.deepEqual(parseProm('').samples, []);
});

test('counterRate: per second, resets count from zero, unknowns are null', () => {
  assert.equal(counterRate(100, 300, 2), 100);
  assert.equal(counterRate(500, 40, 2), 20); // the node restarted: 40 since
  assert.equal(counterRate(null, 40, 2), null);
  assert.equal(counterRate(10, null, 2), null);
  assert.equal(counterRate(10, 20, 0), null);
});

test('histogramQuantile: linear inside the bucket, between two readings', () => {
  const prev = [{ le: 0.001, count: 0 }, { le: 0.002, count: 0 }, { le: Infinity, count: 0 }];
  const cur = [{ le: 0.001, count: 50 }, { le: 0.002, count: 100 }, { le: Infinity, count: 100 }];
  assert.equal(histogramQuantile(prev, cur, 0.5), 0.001);
  assert.ok(Math.abs(histogramQuantile(prev, cur, 0.75) - 0.0015) < 1e-12);
  assert.equal(histogramQuantile(cur, cur, 0.5), null); // nothing observed in between
  // every observation above the last finite bound: that bound
  assert.equal(histogramQuantile(null, [{ le: 0.001, count: 0 }, { le: Infinity, count: 7 }], 0.99), 0.001);
  const m = parseProm(METRICS);
  const b = histogramBuckets(m, 'lattice_operation_duration_seconds');
  assert.deepEqual(b.map((x) => x.le), [0.0001, 0.0002, Infinity]);
  assert.ok(Math.abs(histogramQuantile(null, b, 0.5) - 0.00018) < 1e-12);
});

test('chartPoint: rates from two readings, gauges from the last', () => {
  const a = parseProm(METRICS);
  const b = parseProm(METRICS.replace('kind="get",result="ok"} 100', 'kind="get",result="ok"} 300')
    .replace('lattice_cache_hits_total{cache="default"} 30', 'lattice_cache_hits_total{cache="default"} 90')
    .replace('lattice_cache_misses_total{cache="default"} 10', 'lattice_cache_misses_total{cache="default"} 30'));
  const first = chartPoint(null, a, 0);
  assert.equal(first.ops, null);
  assert.equal(first.hitRatio, null);
  assert.equal(first.cpu, 0.25);
  assert.equal(first.respClients, 3);
  assert.equal(first.regionBytes, 40960);
  const p = chartPoint(a, b, 2000);
  assert.equal(p.ops, 100);
  assert.equal(p.hitRatio, 0.75);
  assert.equal(p.p50, null); // the histogram did not move
});

test('Series keeps the window and skips gaps for last()', () => {
  const s = new Series(10000);
  s.push(0, 1);
  s.push(5000, 5);
  s.push(12000, null);
  assert.deepEqual(s.points.map((p) => p.t), [5000, 12000]);
  assert.equal(s.last(), 5);
  assert.equal(s.max(), 5);
});

const owner = (role, state, cid = 'n') => ({ node: cid, consistent_id: cid, role, state });

test('cellState: lost, moving, under-replicated, owning', () => {
  assert.equal(cellState({ id: 0, state: 'LOST', redundancy: 'lost', owners: [] }), 'lost');
  assert.equal(cellState({ id: 1, state: 'OWNING', redundancy: 'under', owners: [owner('primary', 'OWNING'), owner('backup', 'MOVING')] }), 'moving');
  assert.equal(cellState({ id: 2, state: 'OWNING', redundancy: 'under', owners: [owner('primary', 'OWNING')] }), 'under');
  assert.equal(cellState({ id: 3, state: 'OWNING', redundancy: 'full', owners: [owner('primary', 'OWNING'), owner('backup', 'OWNING')] }), 'owning');
  assert.equal(cellState(undefined), 'lost');
  const parts = { partitions: [0, 1, 2, 3].map((id) => ({ id, state: 'OWNING', redundancy: 'full', owners: [owner('primary', 'OWNING')] })) };
  parts.partitions[2] = { id: 2, state: 'LOST', redundancy: 'lost', owners: [] };
  assert.deepEqual(cellCounts(parts), { owning: 3, under: 0, moving: 0, lost: 1 });
  const t = cellTitle({ id: 7, state: 'OWNING', redundancy: 'full', owners: [owner('primary', 'OWNING', 'a:1'), owner('backup', 'OWNING', 'b:2')] });
  assert.match(t, /^partition 7: owning\nprimary a:1 OWNING\nbackup b:2 OWNING$/);
});

test('mapsMayChange: only while something can move', () => {
  const topo = { topology_version: [3, 2] };
  const full = { x: { partitions: [{ id: 0, state: 'OWNING', redundancy: 'full', owners: [owner('primary', 'OWNING')] }] } };
  const calm = [topo, { in_progress: false }, { serving: true }, full];
  assert.equal(mapsMayChange('3.2', ...calm), false);
  assert.equal(mapsMayChange('3.1', ...calm), true);
  assert.equal(mapsMayChange('3.2', topo, { in_progress: true }, { serving: true }, full), true);
  assert.equal(mapsMayChange('3.2', topo, { in_progress: false }, { serving: false }, full), true);
  const under = { x: { partitions: [{ id: 0, state: 'OWNING', redundancy: 'under', owners: [owner('primary', 'OWNING')] }] } };
  assert.equal(mapsMayChange('3.2', topo, { in_progress: false }, { serving: true }, under), true);
});

test('eta: from the rate partitions completed while watched', () => {
  assert.equal(eta([]), null);
  assert.equal(eta([{ t: 0, left: 10, total: 10 }]), null);
  assert.equal(eta([{ t: 0, left: 10, total: 10 }, { t: 2000, left: 10, total: 10 }]), null); // nothing done yet
  assert.equal(eta([{ t: 0, left: 100, total: 100 }, { t: 2000, left: 90, total: 100 }, { t: 4000, left: 80, total: 100 }]), 16);
  assert.equal(eta([{ t: 0, left: 5, total: 5 }, { t: 2000, left: 0, total: 5 }]), 0);
  // a new rebalance began (more left than before): the watch starts over
  assert.equal(eta([{ t: 0, left: 50, total: 100 }, { t: 2000, left: 10, total: 100 }, { t: 4000, left: 60, total: 60 }]), null);
  assert.equal(eta([{ t: 0, left: 50, total: 100 }, { t: 2000, left: 60, total: 60 }, { t: 4000, left: 30, total: 60 }]), 2);
});

test('rebalanceView: percent, left, the page\'s estimate else the node\'s', () => {
  const c = { name: 'default', partitions_left: 25, partitions_total: 100, eta_s: 30 };
  const v = rebalanceView(c, [{ t: 0, left: 25, total: 100 }]);
  assert.equal(v.percent, 75);
  assert.equal(v.eta, 30); // the page saw nothing complete yet: the node's
  assert.equal(rebalanceView(c, [{ t: 0, left: 35, total: 100 }, { t: 2000, left: 25, total: 100 }]).eta, 5);
  assert.equal(rebalanceView({ name: 'x', partitions_left: 0, partitions_total: 0, eta_s: 0 }, []).percent, 100);
  assert.equal(rebalanceView({ name: 'x', partitions_left: 3, partitions_total: 9, eta_s: -1 }, []).eta, null);
});

test('banner: red with the reasons when the node does not serve', () => {
  assert.deepEqual(banner({ serving: false, status: 503, reasons: ['no quorum: 1 of 3 baseline servers reachable'] }, null),
    { level: 'error', text: 'no quorum: 1 of 3 baseline servers reachable' });
  assert.equal(banner(null, null).level, 'error');
  assert.equal(banner({ serving: true, status: 200, reasons: [] }, { under: 0, moving: 0, silent: 0 }).level, 'ok');
  const w = banner({ serving: true, status: 200, reasons: [] }, { under: 3, moving: 1, silent: 1 });
  assert.equal(w.level, 'warn');
  assert.match(w.text, /3 partitions under-replicated; 1 partitions moving; 1 node silent/);
});

test('overview: counts nodes by role and cells by state over caches', () => {
  const topo = { nodes: [{ role: 'server', state: 'alive' }, { role: 'server', state: 'silent' }, { role: 'client', state: 'alive' }] };
  const p = (red) => ({ id: 0, state: red === 'lost' ? 'LOST' : 'OWNING', redundancy: red, owners: [] });
  const o = overview(topo, { a: { partitions: [p('full'), p('under')] }, b: { partitions: [p('lost')] }, c: null });
  assert.equal(o.servers, 2);
  assert.equal(o.clients, 1);
  assert.equal(o.silent, 1);
  assert.equal(o.caches, 2);
  assert.equal(o.partitions, 3);
  assert.equal(o.owning + o.under + o.lost, 3);
  assert.equal(o.lost, 1);
});

test('formats', () => {
  assert.equal(fmtBytes(512), '512 B');
  assert.equal(fmtBytes(1536), '1.5 KiB');
  assert.equal(fmtBytes(null), '-');
  assert.equal(fmtCount(1234567), '1.2M');
  assert.equal(fmtCount(12), '12');
  assert.equal(fmtDuration(59000), '59s');
  assert.equal(fmtDuration(3723000), '1h 2m');
  assert.equal(fmtSeconds(null), '?');
  assert.equal(fmtSeconds(0.2), '<1s');
  assert.equal(fmtLatency(0.00025), '250 µs');
  assert.equal(fmtLatency(0.0125), '12.5 ms');
});
