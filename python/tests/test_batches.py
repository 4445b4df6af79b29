"""batchfit._runtime.batches: the shapes of a trial's batches, and whether a
varied trial goes on past BATCHFIT_STEPS. Standard library only; run with
python3 -m unittest discover -s tests."""

import collections
import os
import sys
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from batchfit._runtime import batches  # noqa: E402


class Tensor:
    """Anything with a tuple .shape reads as a tensor."""

    def __init__(self, *shape):
        self.shape = tuple(shape)


class ShapesTest(unittest.TestCase):
    def test_paths(self):
        encoding = collections.UserDict({"input_ids": Tensor(2, 7), "attention_mask": Tensor(2, 7)})
        self.assertEqual(batches.shapes_of(encoding), {"input_ids": [2, 7], "attention_mask": [2, 7]})
        self.assertEqual(batches.shapes_of(Tensor(3)), {"batch": [3]})
        nested = (Tensor(2, 3, 8, 8), [{"boxes": Tensor(5, 4)}, "a caption", 7])
        self.assertEqual(batches.shapes_of(nested), {"0": [2, 3, 8, 8], "1.0.boxes": [5, 4]})

    def test_bounded(self):
        many = {str(i): Tensor(i) for i in range(100)}
        self.assertEqual(len(batches.shapes_of(many)), batches.MAX_TENSORS)
        deep: object = Tensor(1)
        for _ in range(50):
            deep = [deep]
        self.assertEqual(batches.shapes_of(deep), {})
        loop: list = []
        loop.append(loop)
        self.assertEqual(batches.shapes_of(loop), {})

    def test_items(self):
        item = {"input_ids": [1, 2, 3], "text": "hello", "label": 1}
        self.assertEqual(batches.shapes_of(item, items=True), {"input_ids": [3], "text": [5]})
        self.assertEqual(batches.shapes_of(item), {})

    def test_arguments_leave_out_parameters(self):
        params = {f"w{i}": Tensor(8, 8) for i in range(40)}
        got = batches.arguments_of((params, Tensor(4, 9)), {"mask": Tensor(4, 9)})
        self.assertEqual(got, {"arg1": [4, 9], "mask": [4, 9]})


class StepsTest(unittest.TestCase):
    def setUp(self):
        batches.reset()
        self.addCleanup(batches.reset)

    def steps(self, lengths, start=1):
        for i, n in enumerate(lengths):
            batches.note({"ids": [4, n]}, "dataloader")
            batches.on_step(start + i)

    def test_fixed(self):
        self.steps([16, 16, 16])
        fields = batches.event_fields(3)
        self.assertFalse(fields["varied"])
        self.assertEqual(fields["shapes"], [{"ids": [4, 16]}] * 3)
        self.assertFalse(batches.keep_going(3, 3))
        self.assertNotIn("bound", batches.event_fields(3))

    def test_varied_goes_on_until_patience(self):
        self.steps([8, 12, 16])
        with mock.patch.dict(os.environ, {batches.PATIENCE_ENV: "2"}):
            self.assertTrue(batches.keep_going(3, 3))
            self.steps([16, 16], start=4)  # steps 4 and 5: 1 and 2 steps without growth
            self.assertTrue(batches.keep_going(4, 3))
            self.assertFalse(batches.keep_going(5, 3))
        fields = batches.event_fields(5)
        self.assertEqual(fields["bound"], "steps")
        self.assertEqual(fields["extended_steps"], 2)
        self.assertEqual(fields["grew_at_step"], 3)
        self.assertEqual(fields["largest"], {"ids": [4, 16]})
        self.assertEqual(fields["why_not"], "not scanned")

    def test_off_never_goes_on(self):
        self.steps([8, 12, 16])
        with mock.patch.dict(os.environ, {batches.WORST_CASE_ENV: "0"}):
            self.assertFalse(batches.keep_going(3, 3))
            self.assertEqual(batches.event_fields(3)["why_not"], "off")

    def test_steps_without_a_batch_stay_aligned(self):
        batches.on_step(1)
        batches.note({"ids": [1, 2]}, "forward")
        batches.on_step(2)
        self.assertEqual(batches.event_fields(2)["shapes"], [{}, {"ids": [1, 2]}])

    def test_worst_first_is_what_a_step_took(self):
        # Gradient accumulation: one step takes a largest batch and another.
        batches.note({"ids": [4, 48]}, "dataloader", worst=True)
        batches.note({"ids": [4, 8]}, "dataloader")
        batches.on_step(1)
        self.steps([12, 16], start=2)
        self.assertFalse(batches.keep_going(3, 3))
        fields = batches.event_fields(3)
        self.assertTrue(fields["worst_first"])
        self.assertEqual(fields["worst_steps"], 1)
        self.assertNotIn("why_not", fields)

    def test_a_failed_first_step_ran_the_worst(self):
        batches.log.planned_largest = {"ids": [4, 48]}
        batches.note({"ids": [4, 48]}, "dataloader", worst=True)
        fields = batches.event_fields(0)
        self.assertTrue(fields["worst_first"])
        self.assertEqual(fields["largest"], {"ids": [4, 48]})
        self.assertEqual(fields["shapes"], [])

    def test_dataloader_outranks_forward(self):
        batches.note({"batch": [4, 8]}, "dataloader")
        self.assertFalse(batches.waiting_for_forward())
        batches.note({"arg0": [4, 8, 16]}, "forward")
        batches.on_step(1)
        self.assertEqual(batches.event_fields(1)["shapes"], [{"batch": [4, 8]}])


if __name__ == "__main__":
    unittest.main()
