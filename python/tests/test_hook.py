"""batchfit._runtime.report: a report that cannot be written is said, never
lost in silence. Standard library only; run with python3 -m unittest discover
-s tests."""

import errno
import os
import sys
import tempfile
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from batchfit._runtime import report  # noqa: E402
from batchfit._runtime.state import state  # noqa: E402


class ReportWriteTest(unittest.TestCase):
    def setUp(self):
        self.path = os.path.join(tempfile.mkdtemp(), "report.jsonl")

    def test_short_write_is_finished(self):
        real = os.write
        calls = []

        def short(fd, data):
            calls.append(len(data))
            return real(fd, data[:5]) if len(calls) == 1 else real(fd, data)

        with mock.patch.object(report.os, "write", short):
            report.append(self.path, {"version": 1, "event": "exit", "pid": 7})
        with open(self.path) as f:
            self.assertEqual(f.read(), '{"version":1,"event":"exit","pid":7}\n')
        self.assertEqual(len(calls), 2)

    def test_short_write_then_full_disk_raises(self):
        real = os.write
        calls = []

        def filling(fd, data):
            calls.append(len(data))
            if len(calls) == 1:
                return real(fd, data[:5])
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        with mock.patch.object(report.os, "write", filling):
            with self.assertRaises(OSError) as caught:
                report.append(self.path, {"version": 1, "event": "exit", "pid": 7})
        self.assertEqual(caught.exception.errno, errno.ENOSPC)

    def test_failure_is_said_on_stderr(self):
        said = []
        real = os.write

        def capture(fd, data):
            if fd == 2:
                said.append(data.decode())
                return len(data)
            return real(fd, data)

        with mock.patch.object(state, "path", "/dev/full"), mock.patch.object(report.os, "write", capture):
            report.write({"version": 1, "event": "exit", "pid": 7})
        why = os.strerror(errno.ENOSPC) + " (errno " + str(errno.ENOSPC) + "): /dev/full"
        self.assertEqual(said, ["\n" + report.REPORT_FAILED + why + "\n"])


if __name__ == "__main__":
    unittest.main()
