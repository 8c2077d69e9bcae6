"""compose.yaml gives each service only what its role needs: a conversion node holds no store
credential (it uses each job's presigned links), as the README and docs/security.md say."""

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
