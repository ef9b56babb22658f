// ioredis's and node-redis's cluster clients (npm, tests/clients/package.json)
// driven line by line by tests/integration/it_resp_clients.c, with the same
// commands as cluster_py.py:
//
//   node cluster_node.js ioredis|node-redis PORT
//   write PREFIX N | read PREFIX N | multi PREFIX | quit
//
// Reads go to replicas (ioredis scaleReads: "slave", node-redis useReplicas),
// which makes both clients send READONLY.  Every command is retried on errors
// for up to 60 s (a killed node is being replaced meanwhile).
"use strict";
const readline = require("readline");

const [kind, port] = [process.argv[2], Number(process.argv[3])];

function sleep(ms) { return new Promise((r) => setTimeout(r, ms)); }

function withTimeout(p, ms) {
  let t;
  return Promise.race([p, new Promise((_, rej) => { t = setTimeout(() => rej(new Error("timeout")), ms); })])
    .finally(() => clearTimeout(t));
}

async function retry(fn) {
  const deadline = Date.now() + 60000;
  for (;;) {
    try {
      return await withTimeout(fn(), 5000);
    } catch (e) {
      if (Date.now() > deadline) throw new Error("gave up: " + e.message);
      await sleep(50);
    }
  }
}

async function connect() {
  if (kind === "ioredis") {
    const { Cluster } = require("ioredis");
    const c = new Cluster([{ host: "127.0.0.1", port }], { scaleReads: "slave", commandTimeout: 5000 });
    await retry(() => c.ping());
    return {
      set: (k, v) => c.set(k, v),
      get: (k) => c.get(k),
      multi: (tag) => c.multi().incr(tag + "a").set(tag + "b", "x").get(tag + "a").exec()
        .then((rs) => rs.map(([err, v]) => (err ? "ERR" : String(v)))),
      quit: () => c.quit(),
    };
  }
  const { createCluster } = require("redis");
  // A client whose connect() failed cannot connect again: a new one per try.
  const c = await retry(async () => {
    const x = createCluster({ rootNodes: [{ url: `redis://127.0.0.1:${port}` }], useReplicas: true });
    x.on("error", () => {});
    try {
      await withTimeout(x.connect(), 4000);
    } catch (e) {
      x.disconnect().catch(() => {});
      throw e;
    }
    return x;
  });
  return {
    set: (k, v) => c.set(k, v),
    get: (k) => c.get(k),
    multi: (tag) => c.multi().incr(tag + "a").set(tag + "b", "x").get(tag + "a").exec()
      .then((rs) => rs.map(String)),
    quit: () => c.quit(),
  };
}

async function main() {
  const c = await connect();
  const rl = readline.createInterface({ input: process.stdin });
  for await (const line of rl) {
    const w = line.trim().split(/\s+/);
    let out;
    try {
      if (w[0] === "write") {
        for (let i = 0; i < Number(w[2]); i++) await retry(() => c.set(`${w[1]}${i}`, `${w[1]}-v${i}`));
        out = "ok";
      } else if (w[0] === "read") {
        out = "ok";
        for (let i = 0; i < Number(w[2]); i++) {
          const got = await retry(() => c.get(`${w[1]}${i}`));
          if (got !== `${w[1]}-v${i}`) { out = `bad ${w[1]}${i} ${got}`; break; }
        }
      } else if (w[0] === "multi") {
        out = "ok " + (await retry(() => c.multi(`{${w[1]}}`))).join(" ");
      } else if (w[0] === "quit") {
        break;
      } else {
        out = "unknown " + w[0];
      }
    } catch (e) {
      out = "error " + e.message;
    }
    process.stdout.write(String(out).replace(/\n/g, " ") + "\n");
  }
  try { await withTimeout(c.quit(), 2000); } catch (e) { /* closing anyway */ }
  process.exit(0);
}

main().catch((e) => { process.stdout.write("error " + e.message + "\n"); process.exit(1); });
