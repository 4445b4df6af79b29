"""Tests of scripts/wheel's parts: PEP 440 versions (and their table in
docs/versions.md) and the platform tags it reads from a binary; and of the
release workflow that calls it. The wheel itself is built, installed and run
by python_test.go (TestWheel)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import re
import struct
import unittest

try:
    import yaml  # Debian's python3-yaml, which scripts/test installs
except ImportError:  # pragma: no cover
    yaml = None

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REAL = os.environ.get("BATCHFIT_TEST_BINARY", "")


def load():
    loader = importlib.machinery.SourceFileLoader("batchfit_wheel", os.path.join(ROOT, "scripts", "wheel"))
    spec = importlib.util.spec_from_loader(loader.name, loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


wheel = load()


def macho(cputype: int, commands: list[bytes]) -> bytes:
    header = struct.pack("<IiiIIII", 0xFEEDFACF, cputype, 0, 2, len(commands), sum(map(len, commands)), 0) + b"\0" * 4
    return header + b"".join(commands)


class VersionTest(unittest.TestCase):
    def test_pep440(self):
        for go, want in [
            ("v1.2.3", "1.2.3"),
            ("v1.2.3-rc.1", "1.2.3rc1"),
            ("v2.0.0-beta2", "2.0.0b2"),
            ("v0.0.0-dev.275+g9c5ec0520456", "0.0.0.dev275+g9c5ec0520456"),
            ("v0.0.1-dev.4+g1a2b3c4d5e6f.dirty", "0.0.1.dev4+g1a2b3c4d5e6f.dirty"),
        ]:
            self.assertEqual(wheel.pep440(go), want, go)
        with self.assertRaises(SystemExit):
            wheel.pep440("dev")

    def test_documented(self):
        # docs/versions.md's table is what pep440 does.
        with open(os.path.join(ROOT, "docs", "versions.md"), encoding="utf-8") as f:
            rows = re.findall(r"^\| `(v[^`]+)` \| `([^`]+)` \|", f.read(), re.M)
        self.assertGreaterEqual(len(rows), 4)
        for go, want in rows:
            self.assertEqual(wheel.pep440(go), want, go)


class TagTest(unittest.TestCase):
    def test_darwin(self):
        uuid = struct.pack("<II", 0x1B, 24) + b"\0" * 16
        build = struct.pack("<IIIIII", 0x32, 24, 1, (11 << 16) | (0 << 8), (14 << 16), 0)
        self.assertEqual(wheel.platform_tag(macho(0x0100000C, [uuid, build]), "darwin", "arm64"), "macosx_11_0_arm64")
        old = struct.pack("<IIII", 0x24, 16, (10 << 16) | (12 << 8), 0)
        self.assertEqual(wheel.platform_tag(macho(0x01000007, [old]), "darwin", "amd64"), "macosx_10_12_x86_64")
        with self.assertRaises(SystemExit):  # an arm64 binary is no x86_64 one
            wheel.platform_tag(macho(0x0100000C, [build]), "darwin", "amd64")

    @unittest.skipUnless(REAL and os.uname().machine == "x86_64", "needs BATCHFIT_TEST_BINARY, an x86_64 linux binary")
    def test_linux(self):
        with open(REAL, "rb") as f:
            data = f.read()
        tag = wheel.platform_tag(data, "linux", "amd64")
        if b"GLIBC_2." in data:  # a cgo build links glibc
            self.assertRegex(tag, r"^manylinux_2_(1[7-9]|[2-9]\d)_x86_64$")
        else:
            self.assertEqual(tag, "manylinux_2_17_x86_64.musllinux_1_1_x86_64")
        with self.assertRaises(SystemExit):
            wheel.platform_tag(data, "linux", "arm64")


WORKFLOW = os.path.join(ROOT, ".github", "workflows", "release.yml")


@unittest.skipIf(yaml is None, "needs PyYAML (Debian's python3-yaml)")
class ReleaseWorkflowTest(unittest.TestCase):
    """The release workflow builds only through scripts/wheel (which runs
    scripts/release), the one definition of the build, and publishes to PyPI
    by trusted publishing."""

    def setUp(self):
        with open(WORKFLOW, encoding="utf-8") as f:
            self.wf = yaml.safe_load(f)

    def steps(self):
        for name, job in self.wf["jobs"].items():
            for step in job["steps"]:
                yield name, job, step

    def test_triggers(self):
        on = self.wf[True] if True in self.wf else self.wf["on"]  # YAML 1.1 reads "on" as true
        self.assertEqual(on["push"]["tags"], ["v*"])
        self.assertEqual(self.wf["permissions"], {"contents": "read"})

    def test_builds_only_through_scripts(self):
        runs = [(name, step["run"]) for name, _, step in self.steps() if "run" in step]
        builds = [run for _, run in runs if re.search(r"\bscripts/(wheel|release)\b", run)]
        self.assertEqual(builds, ["scripts/wheel"])
        for name, run in runs:
            for banned in ("go build", "go install", "CGO_", "GOOS", "zipfile", "python -m build", "pip wheel", "sha256sum >", "tar -c"):
                self.assertNotIn(banned, run, f"job {name} builds outside scripts/: {run!r}")
        # One job builds; the others only publish what it made.
        builders = {name for name, _, step in self.steps() if "run" in step and "scripts/wheel" in step["run"]}
        self.assertEqual(builders, {"build"})
        for name, job in self.wf["jobs"].items():
            if name != "build":
                self.assertEqual(job["needs"], "build")
                self.assertTrue(any(str(s.get("uses", "")).startswith("actions/download-artifact@") for s in job["steps"]), name)

    def test_artifacts(self):
        upload = [s for _, _, s in self.steps() if str(s.get("uses", "")).startswith("actions/upload-artifact@")]
        self.assertEqual(len(upload), 1)
        paths = upload[0]["with"]["path"].split()
        for want in ("dist/SHA256SUMS", "dist/*.tar.gz", "dist/*.whl"):
            self.assertIn(want, paths)
        # The four platforms scripts/release builds by default: the workflow
        # does not narrow them.
        self.assertNotIn("TARGETS", str(self.wf))
        with open(os.path.join(ROOT, "scripts", "release"), encoding="utf-8") as f:
            self.assertIn("linux/amd64 linux/arm64 darwin/amd64 darwin/arm64", f.read())

    def test_trusted_publishing(self):
        publish = [(name, job, s) for name, job, s in self.steps() if str(s.get("uses", "")).startswith("pypa/gh-action-pypi-publish@")]
        self.assertEqual(len(publish), 1)
        name, job, step = publish[0]
        self.assertEqual(job["permissions"], {"id-token": "write"})
        self.assertEqual(job["environment"]["name"], "pypi")
        self.assertNotIn("password", step.get("with", {}), "trusted publishing needs no token")
        self.assertIn("refs/tags/v", job["if"])
        # Only the build job's checkout runs the repository's code, and no
        # job but the publisher may mint an OpenID token.
        for other, j in self.wf["jobs"].items():
            if other != name:
                self.assertNotIn("id-token", j.get("permissions", {}), other)


if __name__ == "__main__":
    unittest.main()
