"""Our kubelet protos against the upstream ones, descriptor by descriptor.

The upstream files come from the `k8s.io/kubelet` Go module (downloaded into
the Go module cache when missing) and are compiled here with grpcio-tools, so
any drift in a name, number, type, label or method shows up as a diff.
"""

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2
from grpc_tools import protoc

from driver.kubeletplugin import protocol
from driver.kubeletplugin.protocol.generate import PROTO_DIR

KUBELET_MODULE = "k8s.io/kubelet@v0.36.3"
UPSTREAM_FILES = {
    "pluginregistration_v1.proto": "pkg/apis/pluginregistration/v1/api.proto",
    "dra_v1.proto": "pkg/apis/dra/v1/api.proto",
    "dra_v1beta1.proto": "pkg/apis/dra/v1beta1/api.proto",
    "dra_health_v1alpha1.proto": "pkg/apis/dra-health/v1alpha1/api.proto",
}


@pytest.fixture(scope="module")
def kubelet_module(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The module's directory in the Go module cache, downloading it if needed."""
    work = tmp_path_factory.mktemp("gomod")
    (work / "go.mod").write_text("module protocheck\n\ngo 1.22\n")
    out = subprocess.run(
        ["go", "mod", "download", "-json", KUBELET_MODULE],
        cwd=work,
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "GOFLAGS": "-mod=mod"},
        timeout=300,
    )
    return Path(json.loads(out.stdout)["Dir"])


def compile_descriptor(
    include: Path, relpath: str, out: Path
) -> descriptor_pb2.FileDescriptorProto:
    args = ["protoc", f"-I{include}", f"--descriptor_set_out={out}", relpath]
    assert protoc.main(args) == 0, f"protoc failed on {include / relpath}"
    files = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())
    return files.file[0]


def shape(fd: descriptor_pb2.FileDescriptorProto) -> dict[str, Any]:
    """What the wire sees: package, messages, fields, enums, services."""

    def message(m: descriptor_pb2.DescriptorProto) -> dict[str, Any]:
        return {
            "fields": [
                (f.name, f.number, f.type, f.label, f.type_name, f.proto3_optional) for f in m.field
            ],
            "nested": {n.name: message(n) for n in m.nested_type},
            "map_entry": m.options.map_entry,
        }

    return {
        "package": fd.package,
        "syntax": fd.syntax,
        "messages": {m.name: message(m) for m in fd.message_type},
        "enums": {e.name: [(v.name, v.number) for v in e.value] for e in fd.enum_type},
        "services": {
            s.name: [
                (m.name, m.input_type, m.output_type, m.client_streaming, m.server_streaming)
                for m in s.method
            ]
            for s in fd.service
        },
    }


@pytest.mark.parametrize("ours", sorted(UPSTREAM_FILES))
def test_descriptor_matches_upstream(ours: str, kubelet_module: Path, tmp_path: Path) -> None:
    upstream = compile_descriptor(kubelet_module, UPSTREAM_FILES[ours], tmp_path / "up.pb")
    mine = compile_descriptor(PROTO_DIR, ours, tmp_path / "ours.pb")
    assert shape(mine) == shape(upstream)
    assert upstream.message_type, "upstream file had no messages: wrong path?"


def test_generated_modules_carry_the_same_descriptors(tmp_path: Path) -> None:
    loaded = {
        "pluginregistration_v1.proto": protocol.registration,
        "dra_v1.proto": protocol.dra_v1,
        "dra_v1beta1.proto": protocol.dra_v1beta1,
        "dra_health_v1alpha1.proto": protocol.health,
    }
    for name, module in loaded.items():
        fd = descriptor_pb2.FileDescriptorProto()
        module.DESCRIPTOR.CopyToProto(fd)
        assert shape(fd) == shape(compile_descriptor(PROTO_DIR, name, tmp_path / "x.pb"))


def test_service_names_are_the_wire_names() -> None:
    services = {
        protocol.registration.DESCRIPTOR.services_by_name["Registration"].full_name,
        protocol.dra_v1.DESCRIPTOR.services_by_name["DRAPlugin"].full_name,
        protocol.dra_v1beta1.DESCRIPTOR.services_by_name["DRAPlugin"].full_name,
        protocol.health.DESCRIPTOR.services_by_name["DRAResourceHealth"].full_name,
    }
    assert services == {
        protocol.REGISTRATION_SERVICE,
        protocol.DRA_V1_SERVICE,
        protocol.DRA_V1BETA1_SERVICE,
        protocol.HEALTH_SERVICE,
    }
