"""compose.yaml gives each service only what its role needs: a conversion node holds no store
credential (it uses each job's presigned links), as the README and docs/security.md say."""

import os
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
STORE_SECRETS = ("DOCSHIFT_S3_ACCESS_KEY", "DOCSHIFT_S3_SECRET_KEY", "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY")


def services():
    return yaml.safe_load((ROOT / "compose.yaml").read_text())["services"]  # merge keys resolved


def names(environment):
    """The variables a service's environment sets or passes on, in either of compose's forms."""
    if isinstance(environment, dict):
        return set(environment)
    return {entry.split("=", 1)[0].strip() for entry in environment or []}


def test_a_node_holds_no_store_credential_nor_the_coordinators_secrets():
    node = names(services()["node"].get("environment"))
    assert node >= {"DOCSHIFT_QUEUE_URL", "DOCSHIFT_QUEUE_KEY"}
    assert not node & set(STORE_SECRETS)
    assert "DOCSHIFT_S3_ENDPOINT" not in node  # links name the store; the node needs no endpoint
    assert "DOCSHIFT_SECRET_KEY" not in node and "DOCSHIFT_METRICS_TOKEN" not in node


def test_no_service_passes_store_keys_the_shared_volume_already_holds():
    # web, worker and objects read the embedded store's credentials from the volume
    for name, service in services().items():
        assert not names(service.get("environment")) & set(STORE_SECRETS), name


def test_the_image_says_how_to_mend_a_data_volume_it_cannot_write(tmp_path):
    """The entrypoint as the image's user (here nobody) on a data dir another uid owns: one line naming the uid and
    what to do, exit 1, before anything starts. It failed in a shell error about .metrics_token, or with six
    tracebacks once DOCSHIFT_METRICS_TOKEN was set."""
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    tmp_path.chmod(0o755)
    for command in ("all", "worker"):
        run = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups", "sh",
                              str(ROOT / "deploy" / "container" / "entrypoint"), command],
                             env={"PATH": os.environ["PATH"], "DOCSHIFT_DATA_DIR": str(data)},
                             capture_output=True, text=True, timeout=30)
        assert run.returncode == 1
        assert run.stderr == (f"docshift: the data dir {data} is not writable by uid 65534: give the volume to that "
                              "uid (chown 65534 on its host folder), or run with --user set to its owner\n")
