"""The embedded SeaweedFS: S3 with credentials is all it serves to the host. Its master,
volume and filer (HTTP and gRPC) run in a network namespace of their own, out of reach of
any local client."""

import contextlib
import os
import signal
import socket
from pathlib import Path

import pytest
import requests
from conftest import free_port_block, start_embedded_store, stop_process_group, wait_for_store

# offsets from DOCSHIFT_S3_PORT: master, volume, filer, admin (HTTP), then their gRPC ports
INTERNAL = {"master": 1, "volume": 2, "filer": 3, "admin": 4, "s3 grpc": 10000, "master grpc": 10001,
            "volume grpc": 10002, "filer grpc": 10003, "admin grpc": 10004}


def s3_port(s3):
    return int(s3["endpoint"].rsplit(":", 1)[1])


@pytest.mark.parametrize("part", sorted(INTERNAL))
def test_internal_ports_refuse_local_clients(s3, part):
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", s3_port(s3) + INTERNAL[part]), timeout=5).close()


def test_filer_and_volume_unreachable_where_weed_listens(s3):
    """weed's own Unix sockets are in its private /tmp, not the host's."""
    port = s3_port(s3)
    for name in (f"seaweedfs-filer-{port + 3}.sock", f"seaweedfs-s3-{port}.sock",
                 f"seaweedfs-filer-grpc-{port + 10003}.sock", f"seaweedfs-master-grpc-{port + 10001}.sock"):
        assert not (Path("/tmp") / name).exists(), name


def test_s3_answers_only_with_credentials(s3, app, tmp_path):
    from docshift.web.context import get_store

    assert requests.get(f"http://{s3['endpoint']}/", timeout=5).status_code == 403
    assert requests.put(f"http://{s3['endpoint']}/{app.config['DOCSHIFT'].s3_bucket}/inputs/x", data=b"x",
                        timeout=5).status_code == 403
    probe = tmp_path / "probe.docx"
    probe.write_bytes(b"stored through the forwarder")
    with app.app_context():
        store = get_store()
        store.put_result("results/tsk_probe/1-0", probe, "docx")
        assert store.result_size("results/tsk_probe/1-0") == probe.stat().st_size
        link = store.presign_result("results/tsk_probe/1-0", "attachment", "docx", 60)
    assert requests.get(link, timeout=5).content == b"stored through the forwarder"
    unsigned = link.split("?", 1)[0]
    assert requests.get(unsigned, timeout=5).status_code == 403


def test_weed_runs_in_its_own_network_namespace(s3):
    weeds = _weeds(s3["data_dir"])
    assert len(weeds) == 1, weeds
    assert (weeds[0] / "ns" / "net").readlink() != Path("/proc/self/ns/net").readlink()
    # its log goes to stderr, relayed: no glog file grows in its private /tmp, which is memory
    assert [path.name for path in (weeds[0] / "root" / "tmp").iterdir() if path.name.startswith("weed.")] == []


def test_weed_runs_with_a_go_processor_for_every_four_cores(s3):
    """On one box weed shares the cores with LibreOffice: a put's hops inside it wake one Go processor, not all."""
    weeds = _weeds(s3["data_dir"])
    environ = dict(item.split(b"=", 1) for item in (weeds[0] / "environ").read_bytes().split(b"\0") if b"=" in item)
    assert environ[b"GOMAXPROCS"] == str(max(1, (os.cpu_count() or 1) // 4)).encode()


def test_an_operators_gomaxprocs_is_kept():
    from docshift.storage.seaweed import environment

    assert environment({"PATH": "/bin"}, 2) == {"PATH": "/bin", "GOMAXPROCS": "1"}
    assert environment({}, 16)["GOMAXPROCS"] == "4"
    assert environment({}, None)["GOMAXPROCS"] == "1"
    assert environment({"GOMAXPROCS": "3"}, 2) == {"GOMAXPROCS": "3"}


def _weeds(data_dir):
    """The /proc dirs of the weed processes serving ``data_dir``."""
    data = str(Path(data_dir).resolve())
    return [pid for pid in Path("/proc").iterdir() if pid.name.isdigit()
            and _cmdline(pid)[:3] == ["weed", "-logtostderr", "mini"]
            and any(arg.startswith(f"-dir={data}") for arg in _cmdline(pid))]


def _cmdline(pid):
    try:
        args = (pid / "cmdline").read_bytes().split(b"\0")
    except OSError:
        return []
    return [Path(args[0].decode()).name, *(a.decode() for a in args[1:])] if args[0] else []


def test_docshift_reaches_the_embedded_store_through_its_socket(s3, tmp_path):
    """With the embedded store, the web and the worker talk S3 to weed's socket in the data dir,
    not to the port and its relay. Here the port they name has nothing listening: only the
    socket can have carried the requests."""
    from docshift import settings
    from docshift.storage.s3 import ObjectStore

    port = free_port_block()
    config = settings.load({"DATA_DIR": str(s3["data_dir"]), "S3_PORT": port, "S3_ENDPOINT": None,
                            "S3_ACCESS_KEY": None, "S3_SECRET_KEY": None, "S3_BUCKET": "socket-path"})
    assert config.s3_socket == str(Path(s3["data_dir"]).resolve() / "objects" / "s3.sock")
    store = ObjectStore(config)
    store.ensure_bucket()
    (tmp_path / "carried.docx").write_bytes(b"carried by the socket")
    store.put_result("results/tsk_socket/1-0", tmp_path / "carried.docx", "docx")
    assert store.client.get_object("socket-path", "results/tsk_socket/1-0").read() == b"carried by the socket"
    store.delete_result("results/tsk_socket/1-0")
    assert store.result_size("results/tsk_socket/1-0") is None
    store.client.remove_bucket("socket-path")
    # the download link still names the port: clients cannot reach the socket
    assert store.presign_result("results/tsk_socket/1-0", "attachment", "docx", 60).startswith(
        f"http://127.0.0.1:{port}/")


def test_an_external_store_is_reached_at_its_endpoint(tmp_path):
    from docshift import settings

    config = settings.load({"DATA_DIR": str(tmp_path), "S3_ENDPOINT": "objects.example:9000",
                            "S3_ACCESS_KEY": "a", "S3_SECRET_KEY": "b"})
    assert config.s3_socket is None


def listening(port):
    """The addresses (hex, as /proc/net/tcp shows them) a TCP socket on ``port`` listens on."""
    rows = [line.split() for line in Path("/proc/net/tcp").read_text().splitlines()[1:]]
    return {local.split(":")[0] for _, local, _, state, *_ in rows
            if state == "0A" and int(local.split(":")[1], 16) == port}


def test_the_s3_port_listens_on_loopback_unless_s3_bind_opens_it(s3, tmp_path):
    """The container image sets DOCSHIFT_S3_BIND=0.0.0.0: a published port reaches the container's
    interface, never its loopback."""
    assert listening(s3_port(s3)) == {"0100007F"}  # 127.0.0.1
    config, process = start_embedded_store(tmp_path, bind="0.0.0.0")
    try:
        port = int(config.s3_port)
        wait_for_store(config, process, tmp_path)
        assert listening(port) == {"00000000"}
    finally:
        stop_process_group(process)


@pytest.mark.slow
def test_a_store_whose_port_is_taken_ends_at_once_and_names_the_port(tmp_path):
    """Another program on the S3 port: the store says so and ends before it starts weed, rather
    than leaving a weed that nothing can reach."""
    port = free_port_block()
    with socket.socket() as other:
        other.bind(("127.0.0.1", port))
        other.listen()
        _, process = start_embedded_store(tmp_path, port)
        try:
            assert process.wait(30) == 1
        finally:
            stop_process_group(process)
    log = (tmp_path / "weed.log").read_text()
    assert f"the object store cannot listen on 127.0.0.1:{port}" in log
    assert "Traceback" not in log
    assert "SeaweedFS" not in log  # weed's banner: it never started
    assert not _weeds(tmp_path)


@pytest.mark.slow
def test_a_store_stopped_with_clients_connected_ends_cleanly(tmp_path):
    """SIGTERM, as allinone stops it, while clients hold keep-alive connections (every minio pool does): weed
    stops, the connections are closed, and the exit is 0 with nothing but JSON lines logged. Python 3.11's
    streams logged a traceback for each connection asyncio.run cancelled."""
    config, process = start_embedded_store(tmp_path)
    try:
        wait_for_store(config, process, tmp_path)
        host, port = config.s3_endpoint.rsplit(":", 1)
        with contextlib.ExitStack() as held:
            clients = [held.enter_context(socket.create_connection((host, int(port)), timeout=5)) for _ in range(4)]
            for client in clients:
                client.sendall(b"GET / HTTP/1.1\r\nHost: store\r\n\r\n")
                assert client.recv(12).startswith(b"HTTP/1.1 403")
            process.send_signal(signal.SIGTERM)
            assert process.wait(60) == 0
            for client in clients:  # the rest of the answer, then the end: each connection was closed
                while client.recv(1 << 16):
                    pass
    finally:
        stop_process_group(process)
    lines = (tmp_path / "weed.log").read_text().splitlines()
    assert lines and all(line.startswith("{") and "Traceback" not in line for line in lines), lines[-5:]
