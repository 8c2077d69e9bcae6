"""The embedded object store: SeaweedFS (``weed mini``) serving S3 on loopback.

Run as ``python -m docshift.storage.seaweed`` (the Procfile's ``objects``). SeaweedFS
always requires credentials (without an identities file it accepts any request, expired
links included) and has telemetry off.

``weed mini`` also runs a master, a volume server and a filer, whose HTTP and gRPC ports
answer anyone without credentials: any local user could read or write every object
through them. So weed runs in a network namespace of its own (bubblewrap), where all its
ports are out of reach, and serves S3 on a Unix socket in the data dir; this process
forwards the S3 port on 127.0.0.1 to that socket, and nothing else. The port serves the
download links; docshift's own processes use the socket (``S3_SOCKET``), without this
relay. Where no namespace can be made, weed listens on loopback itself and a warning says
what is open.
"""

import asyncio
import functools
import json
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from docshift import logs, settings
from docshift.settings import Settings

log = logging.getLogger("docshift.objectstore")
S3_SOCKET = "s3.sock"


def command(config: Settings) -> list[str]:
    """The ``weed mini`` argument list for this configuration (writes the identities file).
    Its ports derive from ``DOCSHIFT_S3_PORT`` so that two instances can run side by side."""
    data = Path(config.data_dir) / "objects"
    data.mkdir(parents=True, exist_ok=True)
    identities = data / "s3-identities.json"
    identities.write_text(json.dumps({"identities": [{
        "name": "docshift",
        "credentials": [{"accessKey": config.s3_access_key, "secretKey": config.s3_secret_key}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }]}))
    identities.chmod(0o600)
    port = config.s3_port
    weed = shutil.which("weed") or str(Path(sys.executable).parent / "weed")
    return [
        # glog's lines to stderr, which serve() relays, not to files in weed's private /tmp: a tmpfs, so they
        # took memory for as long as weed ran (its ring updates alone, every half a minute), up to 1.8 GB a file
        weed, "-logtostderr", "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        "-master.telemetry=false", f"-s3.config={identities}", f"-s3.localSocket={data / S3_SOCKET}",
        f"-s3.port={port}", f"-master.port={port + 1}", f"-volume.port={port + 2}",
        f"-filer.port={port + 3}", f"-admin.port={port + 4}",
        f"-s3.port.grpc={port + 10000}", f"-master.port.grpc={port + 10001}",
        f"-volume.port.grpc={port + 10002}", f"-filer.port.grpc={port + 10003}",
        f"-admin.port.grpc={port + 10004}",
        "-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
    ]


def environment(environ: Mapping[str, str], cores: int | None) -> dict[str, str]:
    """weed's environment: ``environ`` with Go's ``GOMAXPROCS`` at a quarter of the ``cores`` (at least one), unless
    the operator set it. On one box the store shares the cores with LibreOffice, and serves a put or a link at a
    time: with as many Go processors as cores, each of a put's hops inside weed (S3, filer, master, volume) woke an
    idle one. On 2 cores, one processor took 0.5-1.1 ms off a 30 KB put."""
    if environ.get("GOMAXPROCS"):
        return dict(environ)
    return {**environ, "GOMAXPROCS": str(max(1, (cores or 1) // 4))}


def isolated(argv: list[str], data_dir: str) -> list[str]:
    """``argv`` under bubblewrap: its own network and IPC namespaces, the system read-only, a
    private /tmp (weed's other Unix sockets), only the object data writable."""
    data = str(Path(data_dir, "objects").resolve())
    return ["bwrap", "--unshare-net", "--unshare-ipc", "--die-with-parent",
            "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
            "--ro-bind", argv[0], argv[0], "--bind", data, data, "--", *argv]


def can_isolate() -> bool:
    """Whether bubblewrap can make a network namespace here."""
    if not shutil.which("bwrap"):
        return False
    probe = subprocess.run(["bwrap", "--unshare-net", "--ro-bind", "/", "/", "true"], capture_output=True)
    return probe.returncode == 0


# a glog line of weed's: its level's letter, then the date (I1203 22:00:03.123456 file.go:12] ...)
GLOG_LEVEL = re.compile(r"([IWEF])\d{4} ")
# its informational lines (the lock ring's updates, gRPC's sockets) are debug lines here, left out at INFO
GLOG_LEVELS = {"I": logging.DEBUG, "W": logging.WARNING, "E": logging.ERROR, "F": logging.CRITICAL}
BANNER = "═║╔╗╚╝ \t"


async def _relay(output: asyncio.StreamReader) -> None:
    """weed's output as the JSON lines of every docshift process: at glog's level, its banner's frame and
    blank lines left out."""
    while line := await output.readline():
        text = line.decode("utf-8", "replace").strip()
        if text.strip(BANNER):
            level = GLOG_LEVEL.match(text)
            log.log(GLOG_LEVELS[level.group(1)] if level else logging.INFO, "weed: %s", text.strip(BANNER))


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(1 << 16):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


async def _forward(socket_path: str, open_clients: dict[asyncio.Task[None], asyncio.StreamWriter],
                   client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
    try:
        store_reader, store_writer = await asyncio.open_unix_connection(socket_path)
    except OSError:  # weed is still starting: the client sees a closed connection and retries
        client_writer.close()
        return
    task = asyncio.current_task()
    assert task is not None
    open_clients[task] = client_writer
    try:
        await asyncio.gather(_pipe(client_reader, store_writer), _pipe(store_reader, client_writer))
    finally:
        open_clients.pop(task, None)
        for writer in (store_writer, client_writer):
            writer.close()


async def _hang_up(open_clients: dict[asyncio.Task[None], asyncio.StreamWriter]) -> None:
    """Close the clients' connections that are still open (a keep-alive pool's) and let their forwards end.
    Left to asyncio.run, they would be cancelled, and Python 3.11's streams log each cancelled one with a
    traceback."""
    for writer in list(open_clients.values()):
        writer.transport.abort()
    if open_clients:
        await asyncio.wait(list(open_clients), timeout=2)


def _stop(bwrap_pid: int) -> None:
    # bubblewrap passes no signal on: weed itself gets SIGTERM, and stops cleanly
    try:
        children = Path(f"/proc/{bwrap_pid}/task/{bwrap_pid}/children").read_text().split()
    except OSError:
        return
    for pid in children:
        try:
            os.kill(int(pid), signal.SIGTERM)
        except ProcessLookupError:
            pass


async def serve(config: Settings, argv: list[str]) -> int:
    """Run weed isolated and forward S3_BIND:S3_PORT (127.0.0.1 by default) to its S3 socket until
    weed exits."""
    socket_path = Path(config.data_dir) / "objects" / S3_SOCKET
    socket_path.unlink(missing_ok=True)
    open_clients: dict[asyncio.Task[None], asyncio.StreamWriter] = {}
    try:  # the port first: where it is taken, no weed is started
        server = await asyncio.start_server(functools.partial(_forward, str(socket_path), open_clients),
                                            config.s3_bind, config.s3_port)
    except OSError as error:
        log.error("the object store cannot listen on %s:%s (%s); set DOCSHIFT_S3_PORT to a free port",
                  config.s3_bind, config.s3_port, error.strerror or error)
        return 1
    weed = await asyncio.create_subprocess_exec(*isolated(argv, config.data_dir), stdout=asyncio.subprocess.PIPE,
                                                stderr=asyncio.subprocess.STDOUT,
                                                env=environment(os.environ, os.cpu_count()))
    assert weed.stdout is not None
    relay = asyncio.create_task(_relay(weed.stdout))
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, _stop, weed.pid)
    code = await weed.wait()
    try:
        await asyncio.wait_for(relay, 5)  # the rest of its output; nothing else holds the pipe, but never hang on it
    except TimeoutError:
        pass
    server.close()
    await _hang_up(open_clients)
    return code


def main() -> None:
    logs.configure()
    config = settings.load()
    if not config.embedded_store:
        # an external store is configured: stay up so the Procfile's other processes do too
        log.info("DOCSHIFT_S3_ENDPOINT is set; the embedded object store stays off")
        signal.pause()
        return
    argv = command(config)
    if not can_isolate():
        log.warning("bubblewrap cannot make a network namespace here: SeaweedFS's master, volume and "
                    "filer ports on 127.0.0.1 answer any local user without credentials")
        os.execve(argv[0], argv, environment(os.environ, os.cpu_count()))
    sys.exit(asyncio.run(serve(config, argv)))


if __name__ == "__main__":
    main()
