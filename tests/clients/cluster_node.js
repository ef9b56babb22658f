// ioredis's and node-redis's cluster clients (npm, tests/clients/package.json)
// driven line by line by tests/integration/it_resp_cluster.c, with the same
// commands as cluster_py.py:
//
//   node cluster_node.js ioredis|node-redis PORT...   (the RESP ports to start from)
//   write PREFIX N | read PREFIX N | quit
//
// Reads go to replicas (ioredis scaleReads: "slave", node-redis useReplicas),
// which makes both clients send READONLY.  Every command is retried for up
// to 60 s (a killed node is being replaced meanwhile).  Each answer line
// ends with the number of retries it took, for the test's log.
//
// What an application must do itself, and so this driver does:
// - node-redis 4.7 re-reads the slot map only on MOVED/ASK, never on a
//   connection error, and queues every command for a dead node until it
//   comes back (its offline queue).  So the driver turns the queue off
//   (such a command fails at once) and, on any error that is not a Redis
//   error reply, replaces the client by a new one from the root nodes.
// - A command given up on (its timeout, or its client replaced) may still be
//   executed later: node-redis sends what it had queued when the node comes
//   back.  Each key is only ever set to one value here, so a late duplicate
//   SET cannot change what a read sees; a GET answered late is ignored.
"use strict";
const readline = require("readline");

const kind = process.argv[2];
const ports = process.argv.slice(3).map(Number);

function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }

function withTimeout(p, ms) {
  let t;
  return Promise.race([p, new Promise((_, rej) => { t = setTimeout(() => rej(new Error("timeout")), ms); })])
    .finally(() => clearTimeout(t));
}

function ioredis() {
  const { Cluster } = require("ioredis");
  const c = new Cluster(ports.map((port) => ({ host: "127.0.0.1", port })), { scaleReads: "slave", commandTimeout: 5000 });
  return { c, replace: async () => {}, isReply: () => true };
}

// node-redis: a client whose connect() failed cannot connect again, so a new
// one per try.
async function nodeRedisConnect() {
  const { createCluster } = require("redis");
  for (;;) {
    const x = createCluster({
      rootNodes: ports.map((port) => ({ url: `redis://127.0.0.1:${port}` })),
      useReplicas: true,
      defaults: { disableOfflineQueue: true, socket: { connectTimeout: 2000 } },
    });
    x.on("error", () => {});
    try {
      await withTimeout(x.connect(), 5000);
      return x;
    } catch (e) {
      x.disconnect().catch(() => {});
      await sleep(100);
    }
  }
}

async function nodeRedis() {
  const { ErrorReply } = require("redis");
  const h = { c: await nodeRedisConnect(), isReply: (e) => e instanceof ErrorReply };
  h.replace = async () => {
    const old = h.c;
    h.c = await nodeRedisConnect();
    old.disconnect().catch(() => {});
  };
  return h;
}

let retries = 0;

async function retry(h, fn) {
  const deadline = Date.now() + 60000;
  for (;;) {
    try {
      return await withTimeout(fn(h.c), 5000);
    } catch (e) {
      if (Date.now() > deadline) throw new Error("gave up: " + e.message);
      retries++;
      if (!h.isReply(e)) await h.replace();
      else await sleep(50); // CLUSTERDOWN, TRYAGAIN: the grid is switching
    }
  }
}

async function main() {
  const h = kind === "ioredis" ? ioredis() : await nodeRedis();
  await retry(h, (c) => (kind === "ioredis" ? c.ping() : c.get("warmup")));
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const w = line.trim().split(/\s+/);
    let out;
    retries = 0;
    try {
      if (w[0] === "write") {
        for (let i = 0; i < Number(w[2]); i++) await retry(h, (c) => c.set(`${w[1]}${i}`, `${w[1]}-v${i}`));
        out = "ok";
      } else if (w[0] === "read") {
        out = "ok";
        for (let i = 0; i < Number(w[2]); i++) {
          const got = await retry(h, (c) => c.get(`${w[1]}${i}`));
          if (got !== `${w[1]}-v${i}`) { out = `bad ${w[1]}${i} ${got}`; break; }
        }
      } else if (w[0] === "tx") {
        // MULTI INCR {P}a INCR {P}b EXEC through the cluster client's own
        // transaction API: each EXEC answers the same number twice, one more each time.
        out = "ok";
        const a = `{${w[1]}}a`, b = `{${w[1]}}b`;
        for (let i = 1; i <= Number(w[2]); i++) {
          const r = await retry(h, (c) => c.multi().incr(a).incr(b).exec());
          const x = kind === "ioredis" ? r.map((e) => e[1]) : r;
          if (!Array.isArray(x) || x.length !== 2 || Number(x[0]) !== i || Number(x[1]) !== i) {
            out = `bad tx ${i} ${JSON.stringify(r)}`;
            break;
          }
        }
      } else if (w[0] === "colls") {
        // HSET h:PREFIX<i> a=<i> b=PREFIX; RPUSH l:PREFIX<i> x y, LTRIM 0 1 (a retried push leaves the same list)
        for (let i = 0; i < Number(w[2]); i++) {
          const hk = `h:${w[1]}${i}`, lk = `l:${w[1]}${i}`, fields = { a: String(i), b: w[1] };
          await retry(h, (c) => (kind === "ioredis" ? c.hset(hk, fields) : c.hSet(hk, fields)));
          await retry(h, (c) => (kind === "ioredis" ? c.rpush(lk, "x", "y") : c.rPush(lk, ["x", "y"])));
          await retry(h, (c) => (kind === "ioredis" ? c.ltrim(lk, 0, 1) : c.lTrim(lk, 0, 1)));
        }
        out = "ok";
      } else if (w[0] === "creads") {
        out = "ok";
        for (let i = 0; i < Number(w[2]); i++) {
          const hk = `h:${w[1]}${i}`, lk = `l:${w[1]}${i}`;
          const got = await retry(h, (c) => (kind === "ioredis" ? c.hgetall(hk) : c.hGetAll(hk)));
          if (JSON.stringify(got) !== JSON.stringify({ a: String(i), b: w[1] })) { out = `bad ${hk} ${JSON.stringify(got)}`; break; }
          const l = await retry(h, (c) => (kind === "ioredis" ? c.lrange(lk, 0, -1) : c.lRange(lk, 0, -1)));
          if (JSON.stringify(l) !== JSON.stringify(["x", "y"])) { out = `bad ${lk} ${JSON.stringify(l)}`; break; }
        }
      } else if (w[0] === "quit") {
        break;
      } else {
        out = "unknown " + w[0];
      }
    } catch (e) {
      out = "error " + e.message;
    }
    process.stdout.write(`${String(out).replace(/\n/g, " ")} (${retries} retries)\n`);
  }
  try { await withTimeout(h.c.quit(), 2000); } catch (e) { /* closing anyway */ }
  process.exit(0);
}

main().catch((e) => { process.stdout.write("error " + e.message + "\n"); process.exit(1); });
