#!/usr/bin/env python3
"""One benchmark client of a Python Redis lock, in its own process.

The contention bench (harness/src/bench/python_peer/) starts one of these per client and
drives it over a line protocol, one request line on stdin, one reply line on stdout:

    (on start)           -> ready LIB VERSION      | err MESSAGE
    acquire NAME TTL_MS  -> ok TOKEN               | err MESSAGE
    release              -> ok                     | err MESSAGE
    ping                 -> pong   (no Redis: the pipe's own round trip)

It exits when stdin closes, so a worker outlives its parent by no more than one read.
Each library is used the way its README shows a user:

- redis-py (`redis`): `r.lock(name, timeout=ttl_s, blocking=True)` and `acquire()`, which
  retries `SET NX PX` every `sleep` seconds (its default, 0.1 s);
- python-redis-lock (`redis_lock`): `redis_lock.Lock(r, name, expire=ttl_s)` and
  `acquire(blocking=True)`, which waits on a BLPOP of the signal list its release pushes to.

TOKEN is the value the library wrote under its key, so a caller can check on the server
that the library, not the harness, took the lock.

By hand: PYTHONPATH=<pip --target dir> python3 harness/peers/lock_peer.py --lib redis-py \
--url redis://127.0.0.1:6379
"""
import argparse
import sys

REDIS_PY = "redis-py"
PYTHON_REDIS_LOCK = "python-redis-lock"


def reply(line):
    sys.stdout.write(line.replace("\n", " ") + "\n")
    sys.stdout.flush()


class RedisPy:
    """redis-py's `redis.lock.Lock`."""

    def __init__(self, client):
        self.client = client

    def acquire(self, name, ttl_ms):
        lock = self.client.lock(name, timeout=ttl_ms / 1000.0, blocking=True)
        if not lock.acquire():
            raise RuntimeError("acquire(blocking=True) returned False")
        return lock, lock.local.token.decode("ascii")


class PythonRedisLock:
    """python-redis-lock's `redis_lock.Lock`."""

    def __init__(self, client):
        import redis_lock

        self.module = redis_lock
        self.client = client

    def acquire(self, name, ttl_ms):
        # The library takes whole seconds and treats 0 as "never expires".
        if ttl_ms < 1000 or ttl_ms % 1000:
            raise ValueError(f"python-redis-lock expires in whole seconds, not {ttl_ms} ms")
        lock = self.module.Lock(self.client, name, expire=ttl_ms // 1000)
        if not lock.acquire(blocking=True):
            raise RuntimeError("acquire(blocking=True) returned False")
        return lock, lock.id


def start(args):
    import redis

    client = redis.Redis.from_url(args.url)
    client.ping()
    if args.lib == REDIS_PY:
        return RedisPy(client), redis.__version__
    peer = PythonRedisLock(client)
    return peer, peer.module.__version__


def serve(peer):
    held = None
    for raw in sys.stdin:
        words = raw.split()
        try:
            if words == ["ping"]:
                reply("pong")
            elif len(words) == 3 and words[0] == "acquire":
                if held is not None:
                    raise RuntimeError("acquire while holding a lock")
                held, token = peer.acquire(words[1], int(words[2]))
                reply(f"ok {token}")
            elif words == ["release"]:
                if held is None:
                    raise RuntimeError("release without a held lock")
                lock, held = held, None
                lock.release()
                reply("ok")
            else:
                reply(f"err bad request {raw.strip()!r}")
        except Exception as err:  # every failure is a reply: the caller decides
            reply(f"err {type(err).__name__}: {err}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lib", required=True, choices=[REDIS_PY, PYTHON_REDIS_LOCK])
    parser.add_argument("--url", required=True)
    args = parser.parse_args()
    try:
        peer, version = start(args)
    except Exception as err:
        reply(f"err startup: {type(err).__name__}: {err}")
        return 1
    reply(f"ready {args.lib} {version}")
    serve(peer)
    return 0


if __name__ == "__main__":
    sys.exit(main())
