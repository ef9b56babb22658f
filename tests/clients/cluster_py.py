#!/usr/bin/python3
"""redis-py's cluster client (Debian's python3-redis) driven line by line by
tests/integration/it_resp_cluster.c: the test writes a command on stdin and
reads one line back.

  write PREFIX N   SET PREFIX<i> = PREFIX-v<i> for i < N   -> "ok"
  read PREFIX N    GET each (through replica reads unless --primary-reads)
                                                            -> "ok" | "bad KEY GOT"
  tx PREFIX N      N x MULTI INCR {PREFIX}a INCR {PREFIX}b EXEC -> "ok" | "bad tx I GOT"
  colls PREFIX N   HSET h:PREFIX<i> a=<i> b=PREFIX, RPUSH l:PREFIX<i> x y then
                   LTRIM 0 1 (a retried push leaves the same list)  -> "ok"
  creads PREFIX N  HGETALL and LRANGE of each                  -> "ok" | "bad KEY GOT"
  quit

  cluster_py.py [--primary-reads] PORT...   (the first is the startup node;
  --primary-reads: no replica reads, redis-py's default, so every GET goes
  where the client's slot map says the primary is)

Every command is retried on errors for up to 60 s: while a killed node is
being replaced the client may see connection errors, and its job is to find
the new owner by itself.  One exception: redis-py 4.3.4 cannot re-read the
slot map while a node it knew is down (NodesManager.initialize deep-copies
connection kwargs that hold a lock and raises RedisClusterException "cannot
pickle '_thread.lock' object"), so on that error the driver does what an
application must: a new client, from the next port that answers.  Run with
/usr/bin/python3 (Debian's packages).
"""
import sys
import time

from redis.cluster import RedisCluster
from redis.exceptions import RedisClusterException

replicas = "--primary-reads" not in sys.argv[1:]
ports = [int(p) for p in sys.argv[1:] if p != "--primary-reads"]
client = [None]


def connect(port):
    client[0] = RedisCluster(host="127.0.0.1", port=port, read_from_replicas=replicas,
                             socket_timeout=5, decode_responses=True)


def retry(fn):
    deadline = time.time() + 60
    turn = 0
    while True:
        try:
            return fn(client[0])
        except Exception as e:  # the client's own errors: connection, MOVED loops
            if time.time() > deadline:
                raise RuntimeError("gave up: %r" % e)
            if isinstance(e, RedisClusterException) and "pickle" in str(e):
                for _ in ports:  # the next port that answers
                    turn += 1
                    try:
                        connect(ports[turn % len(ports)])
                        break
                    except Exception:
                        pass
            time.sleep(0.05)


def main():
    connect(ports[0])
    for line in sys.stdin:
        words = line.split()
        if not words:
            continue
        cmd = words[0]
        try:
            if cmd == "write":
                prefix, n = words[1], int(words[2])
                for i in range(n):
                    retry(lambda rc: rc.set("%s%d" % (prefix, i), "%s-v%d" % (prefix, i)))
                out = "ok"
            elif cmd == "read":
                prefix, n = words[1], int(words[2])
                out = "ok"
                for i in range(n):
                    got = retry(lambda rc: rc.get("%s%d" % (prefix, i)))
                    if got != "%s-v%d" % (prefix, i):
                        out = "bad %s%d %r" % (prefix, i, got)
                        break
            elif cmd == "tx":
                # redis-py 4.3.4's cluster client has no transactions (its
                # pipeline refuses transaction=True): what an application
                # does is a transaction on the key's node's own client.
                prefix, n = words[1], int(words[2])
                a, b = "{%s}a" % prefix, "{%s}b" % prefix
                out = "ok"

                def one(rc):
                    p = rc.get_node_from_key(a).redis_connection.pipeline(transaction=True)
                    p.incr(a)
                    p.incr(b)
                    return p.execute()
                for i in range(1, n + 1):
                    got = retry(one)
                    if got != [i, i]:
                        out = "bad tx %d %r" % (i, got)
                        break
            elif cmd == "colls":
                prefix, n = words[1], int(words[2])
                for i in range(n):
                    h, lk = "h:%s%d" % (prefix, i), "l:%s%d" % (prefix, i)
                    retry(lambda rc: rc.hset(h, mapping={"a": str(i), "b": prefix}))
                    retry(lambda rc: rc.rpush(lk, "x", "y"))
                    retry(lambda rc: rc.ltrim(lk, 0, 1))
                out = "ok"
            elif cmd == "creads":
                prefix, n = words[1], int(words[2])
                out = "ok"
                for i in range(n):
                    h, lk = "h:%s%d" % (prefix, i), "l:%s%d" % (prefix, i)
                    got = retry(lambda rc: rc.hgetall(h))
                    if got != {"a": str(i), "b": prefix}:
                        out = "bad %s %r" % (h, got)
                        break
                    got = retry(lambda rc: rc.lrange(lk, 0, -1))
                    if got != ["x", "y"]:
                        out = "bad %s %r" % (lk, got)
                        break
            elif cmd == "quit":
                break
            else:
                out = "unknown " + cmd
        except Exception as e:
            out = "error %r" % e
        print(out.replace("\n", " "), flush=True)
    client[0].close()


if __name__ == "__main__":
    main()
