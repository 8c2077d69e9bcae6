"""/healthz latency with clients that send half a request and stall, against a running
docshift, beside its latency with none, in one run.

Opens ``--stalled`` connections (default 40): half stop inside their request headers,
half inside a registration form's body; then times ``--probes`` GETs of /healthz (each may take
at most ``--timeout`` seconds) and prints p50/max and the ratio to the idle latency.

    DOCSHIFT_URL=http://127.0.0.1:8000 python bench/stalled.py [--stalled 40]

To compare worker classes, start the web with another one, e.g.
``GUNICORN_CMD_ARGS="--worker-class gthread --threads 8"``, and run this again.
"""

import argparse
import os
import socket
import time
from urllib.parse import urlsplit

import requests
from harness import quantile

HALF_HEADERS = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Half: "
# the registration form is read without a key: the app waits for the rest of this body
HALF_BODY = (b"POST /marketplace/register HTTP/1.1\r\nHost: x\r\n"
             b"Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 1000\r\n\r\nx-amzn-")


def probe(url, count, timeout):
    """Seconds per /healthz answer; a probe that fails or times out counts as ``timeout``."""
    seconds = []
    for _ in range(count):
        started = time.perf_counter()
        try:
            ok = requests.get(f"{url}/healthz", timeout=timeout).status_code == 200
        except requests.RequestException:
            ok = False
        seconds.append(time.perf_counter() - started if ok else timeout)
    return seconds


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--url", default=os.environ.get("DOCSHIFT_URL", "http://127.0.0.1:8000"))
    parser.add_argument("--stalled", type=int, default=40)
    parser.add_argument("--probes", type=int, default=10)
    parser.add_argument("--timeout", type=float, default=5)
    args = parser.parse_args()
    url = args.url.rstrip("/")
    where = urlsplit(url)
    idle = probe(url, args.probes, args.timeout)
    connections = []
    try:
        for n in range(args.stalled):
            conn = socket.create_connection((where.hostname, where.port or 80), timeout=10)
            conn.sendall(HALF_HEADERS if n % 2 else HALF_BODY)
            connections.append(conn)
        time.sleep(1)  # every stalled request has reached a worker
        loaded = probe(url, args.probes, args.timeout)
    finally:
        for conn in connections:
            conn.close()
    print(f"# /healthz with {args.stalled} stalled clients, against {url}\n")
    print("| | p50 ms | max ms | failed or over the timeout |\n|---|---|---|---|")
    for name, seconds in (("no stalled client", idle), (f"{args.stalled} stalled", loaded)):
        failed = sum(s >= args.timeout for s in seconds)
        print(f"| {name} | {quantile(seconds, 0.5) * 1000:.1f} | {max(seconds) * 1000:.1f} | {failed}/{len(seconds)} |")
    print(f"\nratio of p50, stalled / none: {quantile(loaded, 0.5) / quantile(idle, 0.5):.1f}")


if __name__ == "__main__":
    main()
