#!/usr/bin/env python3
"""A TCP relay that delays every byte by a fixed time in each direction.

The kernel here has no netem, so scripts/netbed.sh adds latency in user space: each chunk read
from one side is written to the other side `--delay-ms` after it was read, in order. Bandwidth is
left to tc (htb) on the veth pair; the relay itself moves hundreds of MB/s, far above the rates
it is used with.

    delay_shim.py --listen 127.0.0.1:5555 --connect 10.77.0.2:5555 --delay-ms 50
"""
import argparse
import asyncio
import time


async def pump(reader, writer, delay_s):
    queue = asyncio.Queue()

    async def send():
        while True:
            due, chunk = await queue.get()
            if chunk is None:
                break
            wait = due - time.monotonic()
            if wait > 0:
                await asyncio.sleep(wait)
            writer.write(chunk)
            await writer.drain()
        writer.close()

    sender = asyncio.ensure_future(send())
    try:
        while True:
            chunk = await reader.read(65536)
            if not chunk:
                break
            queue.put_nowait((time.monotonic() + delay_s, chunk))
    except (ConnectionError, OSError):
        pass
    queue.put_nowait((0, None))
    try:
        await sender
    except (ConnectionError, OSError):
        pass


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--listen", required=True, help="HOST:PORT to accept on")
    ap.add_argument("--connect", required=True, help="HOST:PORT to relay to")
    ap.add_argument("--delay-ms", type=float, required=True, help="one-way delay, each direction")
    args = ap.parse_args()
    lhost, lport = args.listen.rsplit(":", 1)
    chost, cport = args.connect.rsplit(":", 1)
    delay_s = args.delay_ms / 1000.0

    async def handle(client_reader, client_writer):
        try:
            server_reader, server_writer = await asyncio.open_connection(chost, int(cport))
        except OSError:
            client_writer.close()
            return
        await asyncio.gather(pump(client_reader, server_writer, delay_s),
                             pump(server_reader, client_writer, delay_s))

    async def serve():
        server = await asyncio.start_server(handle, lhost, int(lport))
        async with server:
            await server.serve_forever()

    asyncio.run(serve())


if __name__ == "__main__":
    main()
