"""How this project runs kopf, in the controller and in the UltraServer
operator alike: logged in with the configuration the rest of the process uses
(a kubeconfig flag, or the service account), and run without posting Events
or scanning for CRDs (each watches only the resources it names)."""

import kopf
from kubernetes import client


def kopf_login(cfg: client.Configuration) -> kopf.ConnectionInfo:
    auth = (cfg.api_key or {}).get("authorization") or (cfg.api_key or {}).get("BearerToken")
    scheme, token = (
        (auth.split(" ", 1) if auth and " " in auth else ("Bearer", auth)) if auth else (None, None)
    )
    return kopf.ConnectionInfo(
        server=cfg.host,
        ca_path=cfg.ssl_ca_cert,
        insecure=not cfg.verify_ssl,
        scheme=scheme,
        token=token,
        certificate_path=cfg.cert_file,
        private_key_path=cfg.key_file,
    )


def run_kopf(registry: kopf.OperatorRegistry, identity: str) -> None:
    """kopf's loop until the process is signalled. `identity` is given, as kopf
    would otherwise ask getpass for a user name, which fails for the image's
    non-root UID (no passwd entry in a minimal image)."""
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False
    settings.scanning.disabled = True
    kopf.run(
        registry=registry,
        settings=settings,
        standalone=True,
        clusterwide=True,
        # Its type for this str is a NewType kopf does not export.
        identity=identity,  # type: ignore[arg-type]
    )
