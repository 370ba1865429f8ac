#!/usr/bin/env python3
"""A ringside echo server in fifty lines: the template of an outside server.

    cargo xtask conform 'python3 docs/examples/echo_server.py --addr {addr}'
    cargo xtask bench --servers 'reactor,ext:py-echo=python3 docs/examples/echo_server.py --addr {addr} --workers {workers}'

The contract (docs/RING.md): listen on --addr (xtask fills in {addr}; the same address is in
RINGSIDE_ADDR), print `READY <addr>` on stdout once it accepts connections (or just accept:
xtask also watches the port), echo every byte back, close a connection after the client's
half-close once everything is echoed, and exit on SIGTERM. A thread per connection, as
srv-threads does; --workers is accepted and ignored.
"""

import argparse
import os
import signal
import socket
import threading


def serve(conn):
    with conn:
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        while True:
            data = conn.recv(65536)
            if not data:  # the client's half-close: all is echoed, close
                return
            conn.sendall(data)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--addr", default="127.0.0.1:7000")
    p.add_argument("--workers", type=int, default=1)
    args = p.parse_args()
    host, port = args.addr.rsplit(":", 1)
    listener = socket.create_server((host, int(port)), backlog=4096)
    signal.signal(signal.SIGTERM, lambda *_: os._exit(0))
    print(f"READY {host}:{listener.getsockname()[1]}", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=serve, args=(conn,), daemon=True).start()


if __name__ == "__main__":
    main()
