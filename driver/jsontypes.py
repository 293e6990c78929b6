"""The one alias for a decoded JSON object (a Kubernetes object, a status, a spec)."""

from typing import Any

JSON = dict[str, Any]
