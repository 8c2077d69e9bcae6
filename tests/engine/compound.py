"""Legacy files the tests make by writing a compound file again with some of its streams changed."""

from pathlib import Path

import olefile

from docshift.engine import cfb


def with_streams(source: Path, target: Path, **changed: bytes) -> Path:
    """``source``'s compound file again (its root storage's streams), with the streams ``changed`` names."""
    with olefile.OleFileIO(str(source)) as ole:
        streams = {"/".join(path): ole.openstream(path).read() for path in ole.listdir()}
    assert all("/" not in name for name in streams)
    streams.update(changed)
    target.write_bytes(cfb.write(cfb.Entry("Root Entry", children=[cfb.Entry(name, data=data)
                                                                   for name, data in streams.items()])))
    return target
