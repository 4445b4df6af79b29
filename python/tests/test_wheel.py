"""Tests of scripts/wheel's parts: PEP 440 versions and the platform tags it
reads from a binary. The wheel itself is built, installed and run by
python_test.go (TestWheel)."""

from __future__ import annotations

import importlib.machinery
import importlib.util
import os
import struct
import unittest

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


if __name__ == "__main__":
    unittest.main()
