// The JSON pages the console reads, without a browser:
//   - /topology, /caches, /partitions, /rebalance give the JSON the CLI's
//     --json prints (one code path, http/shapes.c): the same keys;
//   - bad input is answered, never fatal: unknown pages 404, an unknown
//     cache 404, a bad count 400, other methods 405, odd query strings;
//   - a node that is not serving (refused by the grid: another cluster
//     name) answers every page at once: the console and /health?format=json
//     with 200, the grid's pages with 503 and a JSON reason.
// Run: LATTICED=... LATTICE_CLI=... node --test tests/console/endpoints.test.mjs
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import { promisify } from 'node:util';

import { Grid, waitFor } from './grid.mjs';

const LATTICED = process.env.LATTICED;
const CLI = process.env.LATTICE_CLI;
const BOUND = 60000;
const run = promisify(execFile);

// Every key path of a JSON value (arrays as [], their elements merged).
function keys(v, at = '', out = new Set()) {
  if (Array.isArray(v)) for (const x of v) keys(x, `${at}[]`, out);
  else if (v && typeof v === 'object') for (const k of Object.keys(v)) { out.add(`${at}.${k}`); keys(v[k], `${at}.${k}`, out); }
  return out;
}

async function status(url, init) {
  try {
    const r = await fetch(url, { ...init, signal: AbortSignal.timeout(10000) });
    return { code: r.status, type: r.headers.get('content-type'), body: await r.text() };
  } catch (e) {
    throw new Error(`${(init && init.method) || 'GET'} ${url.slice(0, 120)}: ${e.message}`);
  }
}

test('the JSON pages: the CLI\'s shapes, bad input, a node not serving', { timeout: 150000 }, async () => {
  assert.ok(LATTICED && fs.existsSync(LATTICED), 'LATTICED names the latticed binary');
  assert.ok(CLI && fs.existsSync(CLI), 'LATTICE_CLI names the lattice binary');
  const grid = new Grid({ latticed: LATTICED, cache: 'default:backups=1,partitions=64' });
  let ok = false;
  try {
    await grid.start();
    await waitFor('3 servers, every partition owning', async () => {
      const t = await grid.json(0, '/topology');
      const p = await grid.json(0, '/partitions?cache=default');
      return t && p && t.nodes.length === 3 && p.nodes.length === 3 && p.lost === 0 && p.under_replicated === 0 &&
        p.partitions.every((x) => x.owners.every((o) => o.state === 'OWNING'));
    }, BOUND);

    // One code path: every key the CLI prints, the page has (the page adds
    // which node answers: "self", "cluster").
    const finder = `127.0.0.1:${grid.peer(0)}..${grid.peer(2)}`;
    const cli = async (...cmd) => JSON.parse((await run(CLI, ['--ip-finder', finder, '--json', ...cmd])).stdout);
    for (const [cmd, page] of [[['top'], '/topology'], [['caches'], '/caches'],
      [['partitions', 'default'], '/partitions?cache=default'], [['rebalance'], '/rebalance']]) {
      const a = keys(await cli(...cmd)), b = keys(await grid.json(0, page));
      const missing = [...a].filter((k) => !b.has(k) && k !== '.answered_by');
      assert.deepEqual(missing, [], `${page} has every key of lattice --json ${cmd.join(' ')}`);
    }
    const top = await grid.json(0, '/topology');
    assert.equal(top.cluster, 'lattice');
    assert.equal(top.nodes.filter((n) => n.self).length, 1);
    assert.ok(top.nodes.every((n) => ['alive', 'silent', 'leaving'].includes(n.state) && typeof n.silent_ms === 'number'));
    assert.ok(top.nodes.every((n) => typeof n.cpu_load === 'number'), 'every node, this one too, reports its CPU');

    // The console's own files, with the policy that keeps the page on the node.
    const index = await status(grid.url(0, '/'));
    assert.equal(index.code, 200);
    assert.match(index.type, /^text\/html/);
    assert.match(index.body, /<script type="module" src="\/app.mjs">/);
    for (const [p, type] of [['/app.mjs', /javascript/], ['/logic.mjs', /javascript/], ['/console.css', /text\/css/],
      ['/favicon.svg', /svg/]]) {
      const r = await fetch(grid.url(0, p));
      assert.equal(r.status, 200, p);
      assert.match(r.headers.get('content-type'), type, p);
      assert.match(r.headers.get('content-security-policy'), /default-src 'none'.*connect-src 'self'/, p);
    }

    // Bad input: answered, and the node still serves after it.
    for (const [p, code] of [['/nope', 404], ['/index.htm', 404], ['/../etc/passwd', 404], ['/partitions?cache=nope', 404],
      ['/partitions?cache=', 400], ['/slowlog?count=abc', 400], ['/slowlog?count=-1', 400], ['/slowlog?count=99999999999999999999', 200],
      ['/health?format=xml', 200], ['/metrics?x=%zz', 200], ['/topology?' + 'a=b&'.repeat(200), 200],
      ['/topology?a=' + 'x'.repeat(3000), 200]]) {
      const r = await status(grid.url(0, p));
      const want = p === '/health?format=xml' ? [200, 503] : [code];
      assert.ok(want.includes(r.code), `${p}: ${r.code}, wanted ${want}`);
    }
    assert.equal((await status(grid.url(0, '/topology'), { method: 'POST', body: 'x' })).code, 405);
    // Not HTTP at all: the connection is answered or closed, nothing else.
    for (const junk of ['GARBAGE\r\n\r\n', 'GET /\r\n\r\n', '\x00\xff\x01binary\r\n\r\n', 'GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n']) {
      await new Promise((resolve) => {
        const sock = net.connect(grid.http(0), '127.0.0.1', () => sock.end(Buffer.from(junk, 'latin1')));
        sock.on('data', () => {});
        sock.on('error', resolve);
        sock.on('close', resolve);
        sock.setTimeout(10000, () => { sock.destroy(); resolve(); });
      });
    }
    assert.equal((await status(grid.url(0, '/'), { method: 'DELETE' })).code, 405);
    const slow = await grid.json(0, '/slowlog?count=5');
    assert.equal(slow.source, 'resp');
    assert.ok(Array.isArray(slow.entries) && slow.entries.length <= 5);
    assert.equal((await status(grid.url(0, '/health'))).code, 200, 'the node serves after all of it');

    // A node refused by the grid (another cluster's name) is not serving:
    // every page still answers.
    const lonePort = grid.base + 9;
    const lone = (p) => `http://127.0.0.1:${lonePort}${p}`;
    grid.spawnNode('refused', ['--port', '0', '--ip-finder', grid.finder(), '--cluster', 'another',
      '--failure-detection-ms', '1000', '--http-port', String(lonePort)]);
    const h = await waitFor('the refused node answers /health?format=json', async () =>
      (await fetch(lone('/health?format=json'), { signal: AbortSignal.timeout(10000) })).json(), BOUND);
    assert.equal(h.serving, false);
    assert.match(h.reasons.join(' '), /not in a grid/);
    assert.equal((await status(lone('/'))).code, 200);
    for (const p of ['/topology', '/caches', '/partitions?cache=default', '/rebalance']) {
      const r = await status(lone(p));
      assert.equal(r.code, 503, p);
      assert.ok(JSON.parse(r.body).error, `${p} says why`);
    }
    assert.equal((await status(lone('/metrics'))).code, 200);
    const none = JSON.parse((await status(lone('/slowlog'))).body);
    assert.equal(none.source, null, 'no RESP port: no slow log');
    assert.equal((await status(grid.url(0, '/health'))).code, 200, 'the grid serves on');
    ok = true;
  } finally {
    grid.stop(!ok);
  }
});
