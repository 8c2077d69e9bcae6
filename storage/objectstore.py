"""The embedded object store: SeaweedFS (``weed mini``) serving S3 on loopback.

Run as ``python -m docshift.storage.objectstore`` (the Procfile's ``objects``). It binds
to 127.0.0.1 only, turns telemetry off, and always requires credentials:
without an identities file SeaweedFS accepts any request, expired links
included. All its ports derive from ``DOCSHIFT_S3_PORT`` so that two instances
(a dev server and the test suite) can run side by side.
"""

import json
import os
import shutil
import signal
import sys
from pathlib import Path

from docshift import settings


def command(config):
    """The ``weed mini`` argument list for this configuration (writes the identities file)."""
    data = Path(config["DATA_DIR"]) / "objects"
    data.mkdir(parents=True, exist_ok=True)
    identities = data / "s3-identities.json"
    identities.write_text(json.dumps({"identities": [{
        "name": "docshift",
        "credentials": [{"accessKey": config["S3_ACCESS_KEY"], "secretKey": config["S3_SECRET_KEY"]}],
        "actions": ["Admin", "Read", "Write", "List", "Tagging"],
    }]}))
    identities.chmod(0o600)
    port = int(config["S3_PORT"])
    weed = shutil.which("weed") or str(Path(sys.executable).parent / "weed")
    return [
        weed, "mini", f"-dir={data}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        "-master.telemetry=false", f"-s3.config={identities}",
        f"-s3.port={port}", f"-master.port={port + 1}", f"-volume.port={port + 2}",
        f"-filer.port={port + 3}", f"-admin.port={port + 4}",
        f"-s3.port.grpc={port + 10000}", f"-master.port.grpc={port + 10001}",
        f"-volume.port.grpc={port + 10002}", f"-filer.port.grpc={port + 10003}",
        f"-admin.port.grpc={port + 10004}",
        "-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0", "-s3.port.lance=0",
    ]


def main():
    config = settings.load()
    if os.environ.get("DOCSHIFT_S3_ENDPOINT"):
        # an external store is configured: stay up so the Procfile's other processes do too
        print("DOCSHIFT_S3_ENDPOINT is set; the embedded object store stays off", flush=True)
        signal.pause()
        return
    argv = command(config)
    os.execv(argv[0], argv)


if __name__ == "__main__":
    main()
