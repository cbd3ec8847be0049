"""setup.py - installs the sbx Python client: `pip install ./sdk/python` from the repository.

The contract modules (sbx/v1/execution_pb2.py and execution_pb2_grpc.py) are generated here, at
build time, from the repository's proto/ (or $SBX_PROTO_DIR) with grpc_tools.protoc (Debian's
python3-grpc-tools), so they always match the worker's contract and are never committed.
Runtime dependencies are grpcio and protobuf (Debian's python3-grpcio and python3-protobuf).
There is deliberately no pyproject.toml: with one, pip would build in an isolated environment
and try to download setuptools, which fails offline; without one it uses the setuptools
already installed.
"""
import os
import subprocess
import sys

from setuptools import setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))


def proto_dir():
    candidates = [os.environ.get("SBX_PROTO_DIR"), os.path.join(HERE, "..", "..", "proto")]
    for d in candidates:
        if d and os.path.isfile(os.path.join(d, "sbx", "v1", "execution.proto")):
            return os.path.abspath(d)
    sys.exit("sbx setup: proto/sbx/v1/execution.proto not found beside sdk/python; build from "
             "the repository or set SBX_PROTO_DIR to its proto/ directory")


class BuildWithContract(build_py):
    """build_py, then the generated contract modules into the build tree."""

    def run(self):
        super().run()
        out = os.path.abspath(self.build_lib)
        src = proto_dir()
        cmd = [sys.executable, "-m", "grpc_tools.protoc", "-I" + src, "--python_out=" + out,
               "--grpc_python_out=" + out, os.path.join(src, "sbx", "v1", "execution.proto")]
        try:
            subprocess.run(cmd, check=True)
        except (OSError, subprocess.CalledProcessError) as e:
            sys.exit("sbx setup: generating the contract modules failed (%s); install "
                     "grpc_tools (Debian: python3-grpc-tools)" % e)
        init = os.path.join(out, "sbx", "v1", "__init__.py")
        with open(init, "w") as f:
            f.write('"""The sbx.v1 contract modules, generated from proto/ at install time."""\n')


setup(
    name="sbx",
    version="0.1.0",
    description="Python client for sbx workers: sandboxed code execution for AI agents",
    long_description=open(os.path.join(HERE, "README.md")).read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    packages=["sbx"],
    python_requires=">=3.9",
    install_requires=["grpcio", "protobuf"],
    cmdclass={"build_py": BuildWithContract},
)
