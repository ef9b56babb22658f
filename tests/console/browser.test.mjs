// The web console in a real browser: Debian's chromium, headless, driven by
// playwright-core, against a grid of three latticed on loopback.  The page
// is loaded from node 0 and must:
//   - show 3 node rows and every partition cell owning;
//   - after kill -9 of node 2, turn cells under-replicated or moving while
//     the rebalance view shows progress (partitions left of total), then
//     every cell owning again once the rebalance is done;
//   - follow node 2's return (a join): three rows, every cell owning;
//   - turn the banner red (no quorum) once nodes 1 and 2 are killed;
//   - log no console error and throw no page error, and ask nothing of any
//     host but the node that served it.
// It saves a screenshot of each view (CONSOLE_SHOTS, default a folder in
// the build tree; docs/OPERATIONS.md shows them).  Every wait polls with a
// generous bound; nothing asserts on elapsed time.
//
// Run: LATTICED=build/node/latticed node --test tests/console/browser.test.mjs
// (ctest -R console_browser sets the paths).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';

import { chromium } from 'playwright-core';

import { Grid, waitFor } from './grid.mjs';

const LATTICED = process.env.LATTICED;
const CHROMIUM = process.env.CHROMIUM || '/usr/bin/chromium';
const SHOTS = process.env.CONSOLE_SHOTS || path.resolve('console-shots');
const BOUND = 60000;

// 256 partitions, one backup, and a throttled rebalance (one 4 KiB batch
// per supplier every 100 ms) over 5,000 entries: after a kill the new
// copies take ~10 s to load, so the page's 2 s polls see them moving.
const CACHE = 'default:backups=1,partitions=256,rebalance_throttle_ms=100,rebalance_batch_bytes=4096';
const KEYS = 5000;

test('the console follows a kill, a rebalance, a join and a lost quorum', { timeout: 200000 }, async () => {
  assert.ok(LATTICED && fs.existsSync(LATTICED), 'LATTICED names the latticed binary');
  assert.ok(fs.existsSync(CHROMIUM), `${CHROMIUM} is installed (scripts/bootstrap installs chromium)`);
  fs.mkdirSync(SHOTS, { recursive: true });
  const grid = new Grid({ latticed: LATTICED, cache: CACHE });
  let browser, ok = false;
  try {
    await grid.start();
    const origin = `127.0.0.1:${grid.http(0)}`;

    // The grid is whole (3 servers in the baseline, every copy OWNING, as
    // each node sees it) before the data goes in, so the kill below moves
    // real entries.
    await waitFor('3 servers, every partition owning on every node', async () => {
      for (let i = 0; i < 3; i++) {
        const t = await grid.json(i, '/topology');
        const p = await grid.json(i, '/partitions?cache=default');
        if (!t || !p || t.quorum.baseline_nodes !== 3 || t.nodes.length !== 3 || p.lost || p.under_replicated ||
            !p.partitions.every((x) => x.owners.every((o) => o.state === 'OWNING'))) return false;
      }
      return true;
    }, BOUND);
    // Loaded through node 0; a write the grid refuses for now (TRYAGAIN:
    // it did not answer in time on a busy machine) is sent again.
    const val = 'v'.repeat(100);
    let todo = [];
    for (let j = 0; j < KEYS; j++) todo.push(['SET', `key:${j}`, val]);
    await waitFor(`${KEYS} SETs acknowledged`, async () => {
      const left = [];
      for (let k = 0; k < todo.length; k += 1000) {
        const cmds = todo.slice(k, k + 1000);
        const replies = await grid.resp_commands(0, cmds);
        cmds.forEach((c, i) => { if (replies[i] !== '+OK') left.push(c); });
      }
      todo = left;
      return todo.length === 0;
    }, BOUND, 1000);

    browser = await chromium.launch({
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-gpu', '--disable-dev-shm-usage', '--no-first-run'],
    });
    const page = await browser.newPage({ viewport: { width: 1360, height: 900 } });
    const consoleErrors = [], pageErrors = [], foreign = [];
    page.on('console', (m) => { if (m.type() === 'error') consoleErrors.push(m.text()); });
    page.on('pageerror', (e) => pageErrors.push(String(e)));
    page.on('request', (r) => {
      const u = new URL(r.url());
      if (u.host !== origin) foreign.push(r.url());
    });

    const view = async (name) => {
      await page.click(`#tabs a[data-view="${name}"]`);
      await page.waitForFunction((v) => document.body.dataset.view === v, name);
    };
    const shot = (name) => page.screenshot({ path: path.join(SHOTS, `${name}.png`) });
    const polls = () => page.evaluate(() => Number(document.body.dataset.polls || 0));
    const cells = () => page.evaluate(() => {
      const c = { owning: 0, under: 0, moving: 0, lost: 0, total: 0 };
      for (const x of document.querySelectorAll('#maps .cell')) { c[x.dataset.state]++; c.total++; }
      return c;
    });

    // A light load through node 0 while the views are shot (the charts
    // show its operations and latency); stopped before the first kill.
    let loading = true;
    const load = (async () => {
      for (let round = 0; loading; round++) {
        const cmds = [];
        for (let j = 0; j < 40; j++) {
          const k = `key:${(round * 40 + j) % KEYS}`;
          cmds.push(j % 4 ? ['GET', k] : ['SET', k, val]);
        }
        await grid.resp_commands(0, cmds).catch(() => {});
        await new Promise((r) => setTimeout(r, 100));
      }
    })();

    await page.goto(`http://${origin}/`);
    await page.waitForFunction(() => document.getElementById('banner').dataset.level === 'ok', null, { timeout: BOUND });

    // Nodes: three rows, the coordinator marked.
    await view('nodes');
    await page.waitForFunction(() => document.querySelectorAll('#nodes tbody tr').length === 3, null, { timeout: BOUND });
    const rows = await page.$$eval('#nodes tbody tr', (trs) => trs.map((t) => t.dataset.node));
    assert.deepEqual(rows.sort(), [0, 1, 2].map((i) => `127.0.0.1:${grid.peer(i)}`));
    assert.equal(await page.$$eval('#nodes tbody tr td:first-child', (t) => t.filter((x) => x.textContent === '\u2605').length), 1);

    // Partitions: every cell owning.
    await view('partitions');
    await waitFor('256 cells, every one owning', async () => {
      const c = await cells();
      return c.total === 256 && c.owning === 256;
    }, BOUND);
    await shot('partitions');

    // The other views, once the charts have a few points.
    const p0 = await polls();
    await waitFor('three polls', async () => (await polls()) >= p0 + 3, BOUND);
    await view('overview');
    await shot('overview');
    await view('nodes');
    await shot('nodes');
    await view('caches');
    await page.waitForFunction(() => document.querySelectorAll('#caches tbody tr').length === 3, null, { timeout: BOUND });
    await shot('caches');
    await view('charts');
    await page.waitForFunction(() => document.querySelectorAll('#charts canvas').length >= 8, null, { timeout: BOUND });
    await shot('charts');
    // The slow log: the load stopped (on a busy machine its pipelined
    // commands pass the 10 ms threshold and would push these out of the
    // newest 128), a few commands logged with slowlog-log-slower-than 0,
    // each reply awaited before the threshold goes back (a key command is
    // logged when its reply comes).
    loading = false;
    await load;
    await grid.resp_commands(0, [['CONFIG', 'SET', 'slowlog-log-slower-than', '0'], ['SET', 'greeting', 'hello'],
      ['INCR', 'visits'], ['APPEND', 'greeting', ' world']]);
    await grid.resp_commands(0, [['CONFIG', 'SET', 'slowlog-log-slower-than', '10000']]);
    await view('slowlog');
    await page.waitForFunction(() => [...document.querySelectorAll('#slowlog td.cmd')].some((t) => t.textContent.startsWith('APPEND greeting')),
      null, { timeout: BOUND });
    await shot('slowlog');

    // kill -9 of node 2: cells leave "owning" while the rebalance view
    // shows partitions left of total, both at the same poll.
    await view('rebalance');
    grid.kill(2);
    await page.waitForFunction(() => {
      const moving = [...document.querySelectorAll('#maps .cell')].some((c) => c.dataset.state === 'under' || c.dataset.state === 'moving');
      const row = document.querySelector('#rebalance tbody tr[data-cache="default"]');
      const left = row ? Number(row.dataset.left) : 0;
      return moving && left > 0 && left <= Number(row.dataset.total);
    }, null, { timeout: BOUND, polling: 200 });
    await shot('rebalance');
    await view('partitions');
    await shot('partitions-rebalancing');

    // ... and every cell owning again once the rebalance is done (two
    // servers: one primary and one backup each).
    await waitFor('every cell owning again after the rebalance', async () => {
      const c = await cells();
      const idle = await page.evaluate(() => document.getElementById('rebalance-state').dataset.inProgress === 'false');
      return c.total === 256 && c.owning === 256 && idle;
    }, BOUND);
    await page.waitForFunction(() => document.querySelectorAll('#nodes tbody tr').length === 2, null, { timeout: BOUND });

    // Node 2 back (a join): three rows, its copies loaded, every cell
    // owning again.
    grid.restart(2);
    await page.waitForFunction(() => document.querySelectorAll('#nodes tbody tr').length === 3, null, { timeout: BOUND });
    await waitFor('every cell owning on three servers after the join', async () => {
      const c = await cells();
      const s = await page.evaluate(() => ({
        idle: document.getElementById('rebalance-state').dataset.inProgress === 'false',
        bars: document.querySelectorAll('#maps .bars > .bar').length,
      }));
      return c.total === 256 && c.owning === 256 && s.idle && s.bars === 3;
    }, BOUND);

    // kill -9 of nodes 1 and 2: one baseline server left, the banner red
    // with the reason.
    await view('overview');
    grid.kill(1);
    grid.kill(2);
    await page.waitForFunction(() => {
      const b = document.getElementById('banner');
      return b.dataset.level === 'error' && /no quorum/.test(b.textContent);
    }, null, { timeout: BOUND });
    assert.match(await page.textContent('#banner'), /no quorum: 1 of [23] baseline servers reachable/);
    await shot('no-quorum');

    assert.deepEqual(consoleErrors, [], 'no console error');
    assert.deepEqual(pageErrors, [], 'no page error');
    assert.deepEqual(foreign, [], 'no request to any host but the node');
    ok = true;
  } finally {
    if (browser) await browser.close().catch(() => {});
    grid.stop(!ok);
  }
});
