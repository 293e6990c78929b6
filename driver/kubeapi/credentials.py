"""Where the apiserver is and who we are to it: a kubeconfig file, or the
pod's service account when there is none."""

from pathlib import Path

from kubernetes import client, config


def configuration(kubeconfig: Path | None) -> client.Configuration:
    """The apiserver's address and credentials from `kubeconfig`, or the
    in-cluster service account when None (its token file is read again as it
    rotates)."""
    if kubeconfig is not None:
        return kubeconfig_configuration(kubeconfig)
    found = client.Configuration()
    config.load_incluster_config(client_configuration=found)
    return found


def kubeconfig_configuration(path: Path) -> client.Configuration:
    """A configuration that reads `path` again when the file changes, so a token
    written into it anew (rotated, or minted for a re-created Node) is used
    without a restart."""
    found = client.Configuration()
    seen = [-1]

    def refresh(_: client.Configuration) -> None:
        try:
            changed = path.stat().st_mtime_ns
        except OSError:
            return  # keep the credential already loaded
        if changed != seen[0]:
            seen[0] = changed
            config.load_kube_config(config_file=str(path), client_configuration=found)
            found.refresh_api_key_hook = refresh  # the loader installs its own

    refresh(found)
    return found


def typed_client(kubeconfig: Path, pool: int = 16) -> client.ApiClient:
    """The kubernetes library's client with its typed objects, for one-shot set-up
    calls and tests: everything that runs on a live cluster uses `ApiServer`."""
    configuration = kubeconfig_configuration(kubeconfig)
    configuration.connection_pool_maxsize = pool
    return client.ApiClient(configuration)
