"""kopf's connection from the configuration the rest of a process uses (a
kubeconfig flag, or the service account), for `kopf.on.login`: the
controller and the UltraServer operator log kopf in the same way."""

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
