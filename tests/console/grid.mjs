// A grid of real latticed processes on loopback for the console's browser
// test, as tests/integration/harness.c starts them: each node's output in
// a log file under a temp dir, every process stopped by pid at the end, and
// a guardian that kills them (SIGKILL) if this process dies first - a test
// killed by its timeout leaves nothing running.
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';

// The test's port block: 10 slots of 10 ports in 29100..29199, a slot
// chosen free (peer ports +0..2, RESP +3..5, HTTP +6..8, +9 for a test's
// own use).  No other test
// uses this range (the integration harness picks at random elsewhere too,
// so every port is checked free before use).
const BLOCK_BASE = 29100, SLOTS = 10, SLOT = 10;

function free(port) {
  return new Promise((resolve) => {
    const s = net.createServer();
    s.once('error', () => resolve(false));
    s.listen({ port, host: '127.0.0.1', exclusive: true }, () => s.close(() => resolve(true)));
  });
}

export async function pickBase() {
  const first = Math.floor(Math.random() * SLOTS);
  for (let k = 0; k < SLOTS; k++) {
    const base = BLOCK_BASE + ((first + k) % SLOTS) * SLOT;
    let ok = true;
    for (let i = 0; i < SLOT && ok; i++) ok = await free(base + i);
    if (ok) return base;
  }
  throw new Error('no free slot of 10 ports in 29100..29199');
}

export const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// Polls cond (async, truthy = done) every `every` ms for up to timeoutMs;
// returns its last value, throws with `what` when it never held.
export async function waitFor(what, cond, timeoutMs, every = 250) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try { last = await cond(); } catch (e) { last = undefined; }
    if (last) return last;
    if (Date.now() > end) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await sleep(every);
  }
}

export class Grid {
  constructor({ latticed, nodes = 3, cache, extra = [] }) {
    this.latticed = latticed;
    this.n = nodes;
    this.cache = cache;
    this.extra = extra;
    this.procs = [];
    this.names = [];
    this.args = [];
    this.dir = fs.mkdtempSync(path.join(os.tmpdir(), 'lattice-console-'));
  }

  peer(i) { return this.base + i; }
  resp(i) { return this.base + 3 + i; }
  http(i) { return this.base + 6 + i; }
  url(i, p = '/') { return `http://127.0.0.1:${this.http(i)}${p}`; }

  async start() {
    this.base = await pickBase();
    this.guardian();
    const finder = this.finder();
    for (let i = 0; i < this.n; i++) {
      this.spawnNode(`n${i}`, ['--port', String(this.peer(i)), '--port-range', '1', '--ip-finder', finder,
        '--failure-detection-ms', '1000', '--resp-port', String(this.resp(i)), '--http-port', String(this.http(i)),
        '--cache', this.cache, ...this.extra]);
    }
  }

  finder() { return `127.0.0.1:${this.peer(0)}..${this.peer(this.n - 1)}`; }

  // One more latticed with these arguments, its output in NAME.log; its
  // index for kill(); stopped with the grid.
  spawnNode(name, args) {
    this.procs.push(null);
    this.names.push(name);
    this.args.push(args);
    this.launch(this.procs.length - 1);
    return this.procs.length - 1;
  }

  // Node i again, with the arguments it had (after a kill): it rejoins.
  restart(i) {
    this.kill(i);
    this.launch(i);
  }

  launch(i) {
    const log = fs.openSync(path.join(this.dir, `${this.names[i]}.log`), 'a');
    const p = spawn(this.latticed, this.args[i], { stdio: ['ignore', log, log] });
    fs.closeSync(log);
    this.procs[i] = p;
    fs.appendFileSync(this.pidFile, `${p.pid}\n`);
  }

  // A shell that outlives nothing: when this process is gone, it kills
  // every pid listed in the pid file.
  guardian() {
    this.pidFile = path.join(this.dir, 'pids');
    fs.writeFileSync(this.pidFile, '');
    const script = `while kill -0 ${process.pid} 2>/dev/null; do sleep 1; done; ` +
      `for p in $(cat '${this.pidFile}'); do kill -9 "$p" 2>/dev/null; done`;
    this.guard = spawn('/bin/sh', ['-c', script], { stdio: 'ignore', detached: true });
    this.guard.unref();
  }

  kill(i, signal = 'SIGKILL') {
    const p = this.procs[i];
    if (p && p.exitCode === null && p.signalCode === null) p.kill(signal);
  }

  // Every node stopped (SIGKILL: nothing of theirs is kept), the guardian
  // too; the logs stay when keepLogs (a failure), else the dir goes.
  stop(keepLogs) {
    for (let i = 0; i < this.procs.length; i++) this.kill(i);
    if (this.guard) try { process.kill(this.guard.pid, 'SIGKILL'); } catch { /* gone */ }
    if (keepLogs) {
      for (const name of this.names) {
        const f = path.join(this.dir, `${name}.log`);
        const tail = fs.existsSync(f) ? fs.readFileSync(f, 'utf8').split('\n').slice(-25).join('\n') : '';
        process.stderr.write(`---- ${f} (last lines)\n${tail}\n`);
      }
    } else {
      fs.rmSync(this.dir, { recursive: true, force: true });
    }
  }

  async json(i, p) {
    const r = await fetch(this.url(i, p), { signal: AbortSignal.timeout(10000) });
    return r.ok ? r.json() : null;
  }

  // Sends RESP commands (arrays of strings) to node i in one pipeline;
  // resolves with one entry per reply: the line of a simple reply (+OK,
  // -ERR ..., :n), the payload of a bulk string (null for nil), or for an
  // array "*n" (its elements skipped).
  resp_commands(i, cmds) {
    return new Promise((resolve, reject) => {
      const s = net.connect(this.resp(i), '127.0.0.1');
      const enc = (a) => `*${a.length}\r\n` + a.map((x) => `$${Buffer.byteLength(x)}\r\n${x}\r\n`).join('');
      let buf = Buffer.alloc(0);
      const replies = [];
      s.setTimeout(60000, () => { s.destroy(); reject(new Error('RESP: no answer in 60 s')); });
      s.on('error', reject);
      s.on('data', (d) => {
        buf = Buffer.concat([buf, d]);
        for (;;) {
          const r = readReply(buf, 0);
          if (!r) break;
          replies.push(r.value);
          buf = buf.subarray(r.end);
        }
        if (replies.length >= cmds.length) { s.end(); resolve(replies); }
      });
      s.write(cmds.map(enc).join(''));
    });
  }
}

// One RESP2 reply at buf[at]: {value, end}, or null when it is not all in.
function readReply(buf, at) {
  const eol = buf.indexOf('\r\n', at);
  if (eol < 0) return null;
  const line = buf.toString('latin1', at, eol);
  const end = eol + 2;
  if (line[0] === '$') {
    const n = Number(line.slice(1));
    if (n < 0) return { value: null, end };
    if (buf.length < end + n + 2) return null;
    return { value: buf.toString('latin1', end, end + n), end: end + n + 2 };
  }
  if (line[0] === '*') {
    let e = end;
    for (let k = 0; k < Number(line.slice(1)); k++) {
      const r = readReply(buf, e);
      if (!r) return null;
      e = r.end;
    }
    return { value: line, end: e };
  }
  return { value: line, end };
}
