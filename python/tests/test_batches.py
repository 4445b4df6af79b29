"""batchfit._runtime.batches and loader: the shapes of a trial's batches,
whether a varied trial goes on past BATCHFIT_STEPS, and the loader scan that
puts the largest batches first. Standard library, and torch where installed
(the loader tests); run with python3 -m unittest discover -s tests."""

import collections
import importlib
import importlib.util
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest
from unittest import mock

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from batchfit._runtime import batches, loader, torch_steps  # noqa: E402
from batchfit._runtime.state import state  # noqa: E402

try:
    import torch
    import torch.utils.data
except ImportError:  # the loader tests need it
    torch = None


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
        self.assertEqual(batches.shapes_of(item, items=True), {"input_ids": [3]})
        self.assertEqual(batches.shapes_of(item), {})
        # A file name beside an image is not a shape; raw text alone is.
        image = {"image": Tensor(3, 32, 32), "label": 1, "path": "train/img_7.jpg"}
        self.assertEqual(batches.shapes_of(image, items=True), {"image": [3, 32, 32]})
        self.assertEqual(batches.shapes_of({"text": "hello", "label": 1}, items=True), {"text": [5]})

    def test_a_partial_batch_is_the_same_shape(self):
        full, last = {"0": [64, 8], "1": [64]}, {"0": [36, 8], "1": [36]}
        with mock.patch.dict(os.environ, {batches.BATCH_SIZE_ENV: "64"}):
            self.assertTrue(batches.same_shape(full, last))
            self.assertTrue(batches.same_shape(last, full))
            self.assertFalse(batches.same_shape({"ids": [64, 8]}, {"ids": [36, 9]}))
            self.assertFalse(batches.same_shape({"ids": [64, 8]}, {"ids": [64, 9]}))
            # Leading dimensions of 64 and more are no partial batch (a
            # detection batch's boxes, one row per object).
            self.assertFalse(batches.same_shape({"boxes": [90, 4]}, {"boxes": [70, 4]}))
            # A partial batch has one leading dimension in all its tensors.
            self.assertFalse(batches.same_shape(full, {"0": [36, 8], "1": [20]}))
        with mock.patch.dict(os.environ, {batches.BATCH_SIZE_ENV: ""}):
            self.assertFalse(batches.same_shape(full, last))

    def test_one_tensor_per_sample_is_one_entry(self):
        boxes = [Tensor(3, 4), Tensor(250, 4), Tensor(7, 4)]
        batch = (Tensor(3, 3, 8, 8), boxes)
        with mock.patch.dict(os.environ, {"BATCHFIT_BATCH_SIZE": "3"}):
            self.assertEqual(batches.shapes_of(batch), {"0": [3, 3, 8, 8], "1": [260, 4]})
            # Not as long as the batch: a structure, position by position.
            self.assertEqual(batches.shapes_of([Tensor(3, 5), Tensor(3, 5)]), {"0": [3, 5], "1": [3, 5]})
        with mock.patch.dict(os.environ, {"BATCHFIT_BATCH_SIZE": "40"}):
            many = [Tensor(i + 1, 4) for i in range(40)]
            self.assertEqual(batches.shapes_of({"boxes": many}), {"boxes": [820, 4]})

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

    def test_a_partial_last_batch_is_not_varied(self):
        # 100 items of one shape in batches of 64: 64, 36, 64, ...
        with mock.patch.dict(os.environ, {batches.BATCH_SIZE_ENV: "64"}):
            for step, n in enumerate([64, 36, 64], start=1):
                batches.note({"0": [n, 8], "1": [n]}, "dataloader")
                batches.on_step(step)
            self.assertFalse(batches.keep_going(3, 3))
            fields = batches.event_fields(3)
        self.assertFalse(fields["varied"])
        self.assertNotIn("why_not", fields)

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

    def test_processes_that_step_together_never_go_on(self):
        self.steps([8, 12, 16])
        with mock.patch.dict(os.environ, {"WORLD_SIZE": "2"}):
            self.assertFalse(batches.keep_going(3, 3))
        fake_jax = mock.Mock(process_count=lambda: 4)
        with mock.patch.dict(sys.modules, {"jax": fake_jax}):
            self.assertFalse(batches.keep_going(3, 3))
        with mock.patch.dict(os.environ, {"WORLD_SIZE": "1"}):
            self.assertTrue(batches.keep_going(3, 3))

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

    def test_the_failed_step_counts_for_largest(self):
        self.steps([8, 12])
        batches.note({"ids": [4, 48]}, "dataloader")  # step 3 runs out of memory
        fields = batches.event_fields(2)
        self.assertEqual(fields["largest"], {"ids": [4, 48]})
        self.assertEqual(len(fields["shapes"]), 2)
        self.assertFalse(fields["worst_first"])
        batches.reset()
        batches.note({"arg0": [4, 48]}, "forward")  # the first step does
        self.assertEqual(batches.event_fields(0)["largest"], {"arg0": [4, 48]})

    def test_a_dataloader_batch_outranks_forward_until_its_step(self):
        batches.note({"batch": [4, 8]}, "dataloader")
        batches.on_step(1)
        self.assertTrue(batches.waiting_for_forward())
        batches.note({"arg0": [4, 12]}, "forward")
        batches.on_step(2)
        self.assertEqual(batches.event_fields(2)["shapes"], [{"batch": [4, 8]}, {"arg0": [4, 12]}])
        self.assertFalse(batches.fed_by_loader())

    def test_dataloader_outranks_forward(self):
        batches.note({"arg0": [1, 64]}, "forward")  # a warm-up call
        batches.note({"batch": [4, 8]}, "dataloader")
        self.assertFalse(batches.waiting_for_forward())
        batches.note({"arg0": [4, 8, 16]}, "forward")
        batches.note({"arg1": [4, 8, 16]}, "jit")
        batches.on_step(1)
        self.assertEqual(batches.event_fields(1)["shapes"], [{"batch": [4, 8]}])
        self.assertEqual(batches.event_fields(1)["source"], "dataloader")


@unittest.skipIf(torch is None, "needs torch")
class LoaderTest(unittest.TestCase):
    def setUp(self):
        batches.reset()
        self.addCleanup(batches.reset)
        # The report's folder is the search's: the adapter keeps what it
        # read of a dataset there for the search's later trials.
        folder = tempfile.TemporaryDirectory()
        self.addCleanup(folder.cleanup)
        self.folder = folder.name
        patcher = mock.patch.multiple(state, path=os.path.join(folder.name, "trial-001-b2.report"), steps=0,
                                      stop_at=3)
        patcher.start()
        self.addCleanup(patcher.stop)
        counter = mock.patch.object(loader, "_scanned_datasets", 0)  # a trial's process: none read yet
        counter.start()
        self.addCleanup(counter.stop)

    def loader(self, lengths, **kw):
        class Items(torch.utils.data.Dataset):
            def __len__(self):
                return len(lengths)

            def __getitem__(self, i):
                return list(range(lengths[i]))

        def pad(items):
            longest = max(len(x) for x in items)
            return torch.tensor([x + [0] * (longest - len(x)) for x in items])

        return torch.utils.data.DataLoader(Items(), batch_size=2, collate_fn=pad, **kw)

    def first(self, data):
        """What the loader's iterator serves first, as the wrapped __next__
        yields it (the loader's own next batch where it says so), or
        None."""
        it = iter(data)
        loader._prepare(data, it, torch.utils.data.IterableDataset)
        served = it.__dict__.get("_batchfit_first")
        if served is None:
            return None
        return (next(it) if batch is loader._OWN else batch for batch in served)

    def take(self, first, per_step=1):
        """What first serves to a program that steps after every per_step
        batches (gradient accumulation), as the hook counts its steps;
        the count is put back after."""
        taken, steps = [], state.steps
        try:
            for batch in first:
                taken.append(batch)
                if len(taken) % per_step == 0:
                    state.steps += 1
        finally:
            state.steps = steps
        return taken

    def test_largest_first(self):
        first = self.first(self.loader([3, 4, 5, 6, 30, 2, 9, 9]))
        self.assertFalse(batches.log.worst_first)  # until a step takes one
        # The epoch's first batch at step 1 (the optimizer makes its
        # state), the largest at step 2; then one step of the loader's own.
        self.assertEqual([tuple(b.shape) for b in self.take(first)], [(2, 4), (2, 30)])
        self.assertEqual(batches.log.planned_largest, {"batch": [2, 30]})
        self.assertEqual(batches.log.scanned_batches, 4)

    def test_one_tensor_per_item_ranks_by_the_sum(self):
        # A detection batch keeps one tensor of boxes per image: the batch
        # with the most boxes in all is the largest, not the one with the
        # single most crowded image.
        objects = [300, 1, 1, 1, 120, 120, 120, 120, 5, 5]

        class Scenes(torch.utils.data.Dataset):
            def __len__(self):
                return len(objects)

            def __getitem__(self, i):
                return torch.zeros(objects[i], 4)

        data = torch.utils.data.DataLoader(Scenes(), batch_size=4, collate_fn=list)
        with mock.patch.dict(os.environ, {"BATCHFIT_BATCH_SIZE": "4"}), mock.patch.object(state, "stop_at", 2):
            first = self.first(data)
        # The epoch's own first batch, then the largest.
        self.assertEqual([[len(b) for b in batch] for batch in self.take(first)], [[300, 1, 1, 1], [120, 120, 120, 120]])
        self.assertEqual(batches.log.planned_largest, {"batch": [480, 4]})

    def test_one_scan_a_loader(self):
        data = self.loader([3, 4, 5, 6, 30, 2, 9, 9])
        with mock.patch.object(loader, "_scan", wraps=loader._scan) as scan:
            peeked = self.take(self.first(data))
            again = self.take(self.first(data))
        self.assertEqual(scan.call_count, 1)
        self.assertEqual([tuple(b.shape) for b in again], [tuple(b.shape) for b in peeked])
        self.assertIsNot(again[0], peeked[0])  # collated afresh

    def test_fixed_items_are_left_alone(self):
        self.assertIsNone(self.first(self.loader([5] * 8)))
        self.assertFalse(batches.log.worst_first)
        self.assertIsNone(batches.log.scan_seconds)

    def test_a_rare_item_of_another_shape_is_found(self):
        # One long item in a thousand, none of the 16 spread samples: read
        # on, it is found, and the loader's largest batch is its.
        lengths = [8] * 1000
        lengths[997] = 64
        first = self.first(self.loader(lengths))
        self.assertIsNotNone(first)
        self.assertEqual(batches.log.planned_largest, {"batch": [2, 64]})

    def test_what_was_read_is_kept_for_the_search(self):
        from batchfit._runtime import sources

        # As the hook does (once a process: the audit hook stays): what it
        # records is this test's alone.
        sources.watch_opens()
        state.opened.clear()
        self.addCleanup(state.opened.clear)
        reads = []

        class Items(torch.utils.data.Dataset):
            def __len__(self):
                return 500

            def __getitem__(self, i):
                reads.append(i)
                return torch.zeros(8)

        self.assertIsNone(self.first(torch.utils.data.DataLoader(Items(), batch_size=2)))
        self.assertEqual(batches.log.why_not, "500 of 500 items read, of one shape")
        self.assertGreaterEqual(len(reads), 500)
        kept = [f for f in os.listdir(self.folder) if f.startswith("items-")]
        self.assertEqual(len(kept), 1)
        # A later trial of the search (a process of its own): the 16
        # samples, then the verdict.
        reads.clear()
        batches.reset()
        loader._scanned_datasets = 0
        self.assertIsNone(self.first(torch.utils.data.DataLoader(Items(), batch_size=2)))
        self.assertEqual(len(reads), 16)
        self.assertEqual(batches.log.why_not, "500 of 500 items read, of one shape")
        # The verdict is batchfit's file, not one the program read: the
        # history, which checks those, must not go with the log folder.
        self.assertNotIn(os.path.join(self.folder, kept[0]), [f["path"] for f in sources.opened_files(())])

    def test_reading_on_spreads_over_the_whole_dataset(self):
        # Long items only in the dataset's second half, every 1000th; a
        # budget of 2,000 reads of 100,000 finds them.
        lengths = [8] * 100_000
        for i in range(50_001, 100_000, 1000):
            lengths[i] = 64
        reads = []

        class Items(torch.utils.data.Dataset):
            def __len__(self):
                return len(lengths)

            def __getitem__(self, i):
                reads.append(i)
                if len(reads) > 2000 + loader._SAMPLE:
                    raise loader._TimedOut()
                return list(range(lengths[i]))

        data = torch.utils.data.DataLoader(Items(), batch_size=2)
        with mock.patch.object(loader, "DEFAULT_SCAN_SECONDS", 60.0):
            it = iter(data)
            loader._prepare(data, it, torch.utils.data.IterableDataset)
        self.assertNotIn("of one shape", batches.log.why_not or "")

    def test_two_datasets_alike_keep_verdicts_of_their_own(self):
        # A validation Subset of fixed items, scanned first, and a training
        # Subset of the same dataset and length whose items vary.
        lengths = [8] * 1000 + [8 + i % 50 for i in range(1000)]

        class Items(torch.utils.data.Dataset):
            def __len__(self):
                return len(lengths)

            def __getitem__(self, i):
                return list(range(lengths[i]))

        val = torch.utils.data.Subset(Items(), range(1000))
        train = torch.utils.data.Subset(Items(), range(1000, 2000))
        for trial in range(2):
            loader._scanned_datasets = 0
            batches.reset()
            self.assertIsNone(self.first(self.loader_of(val)), trial)
            self.assertIsNotNone(self.first(self.loader_of(train)), trial)

    def loader_of(self, dataset):
        def pad(items):
            longest = max(len(x) for x in items)
            return torch.tensor([x + [0] * (longest - len(x)) for x in items])

        return torch.utils.data.DataLoader(dataset, batch_size=2, collate_fn=pad)

    def test_step_one_takes_the_iterators_own_first_batch(self):
        # With workers and shuffling, the iterator has drawn its epoch
        # before the scan: step 1 is the batch it yields, not the plan's.
        lengths = [3 + (i * 7) % 29 for i in range(40)]
        data = self.loader(lengths, shuffle=True, generator=torch.Generator().manual_seed(1), num_workers=2)
        own = next(iter(torch.utils.data.DataLoader(data.dataset, batch_size=2, collate_fn=data.collate_fn,
                                                    shuffle=True, generator=torch.Generator().manual_seed(1),
                                                    num_workers=2)))
        first = self.take(self.first(data))
        self.assertTrue(torch.equal(first[0], own))

    def test_a_fetcher_a_batch_ahead_ends_on_a_batch_of_its_own(self):
        # Five steps, batch 2 asked for before step 1 runs: the first, the
        # largest (twice: the fetcher asked for step 3's before step 2
        # had run), the next largest, then (None: the first is done) the
        # loader's own at step 5.
        with mock.patch.object(state, "stop_at", 5):
            first = self.first(self.loader([3, 4, 5, 6, 30, 2, 9, 9, 7, 7]))
            ahead, ran = [next(first)], []
            for _ in range(5):
                ahead.append(next(first, None))
                ran.append(ahead.pop(0))
                state.steps += 1
        self.assertEqual([None if b is None else b.shape[1] for b in ran], [4, 30, 30, 9, None])

    def test_reading_on_is_bounded_in_time(self):
        with mock.patch.object(loader, "ONE_SHAPE_SECONDS", 0.0):
            self.assertIsNone(self.first(self.loader([8] * 1000)))
        self.assertRegex(batches.log.why_not, r"^\d+ of 1000 items read, of one shape$")
        self.assertLess(int(batches.log.why_not.split()[0]), 1000)

    def test_random_state_is_put_back(self):
        data = self.loader([3, 4, 5, 6, 30, 2, 9, 9], shuffle=True)
        torch.manual_seed(1)
        self.assertIsNotNone(self.first(data))  # the scan shuffled a plan
        after = torch.rand(1)
        torch.manual_seed(1)
        iter(data)  # draws its base seed, as first() did
        self.assertTrue(torch.equal(after, torch.rand(1)))

    def test_padding_to_one_length_is_left_alone(self):
        data = self.loader([3, 4, 5, 6, 30, 2, 9, 9])
        data.collate_fn = lambda items: torch.zeros(len(items), 32)
        self.assertIsNone(self.first(data))
        self.assertFalse(batches.log.planned_varied)
        self.assertEqual(batches.log.why_not, "planned batches of one shape")

    def test_a_partial_last_batch_pads_alike(self):
        # Seven items in batches of two: the last holds one, padded to the
        # same length as the rest.
        data = self.loader([3, 4, 5, 6, 30, 2, 9])
        data.collate_fn = lambda items: torch.zeros(len(items), 32)
        self.assertIsNone(self.first(data))
        self.assertFalse(batches.log.planned_varied)
        self.assertEqual(batches.log.why_not, "planned batches of one shape")

    def test_file_names_beside_fixed_images_are_left_alone(self):
        class Images(torch.utils.data.Dataset):
            def __len__(self):
                return 40

            def __getitem__(self, i):
                return {"image": torch.zeros(3, 4, 4), "label": i % 10, "path": f"train/img_{i}.jpg"}

        data = torch.utils.data.DataLoader(Images(), batch_size=4)
        self.assertIsNone(self.first(data))
        self.assertEqual(batches.log.why_not, "40 of 40 items read, of one shape")
        self.assertFalse(batches.log.planned_varied)

    def test_a_step_is_left_after_the_largest(self):
        # A trial of one step takes the largest at once.
        with mock.patch.object(state, "stop_at", 1):
            first = self.take(self.first(self.loader([3, 4, 5, 6, 30, 2, 9, 9])))
        self.assertEqual([tuple(b.shape) for b in first], [(2, 30), (2, 30)])
        self.assertIsNot(first[0], first[1])  # the repeat a copy
        with mock.patch.object(state, "stop_at", 5):
            first = self.take(self.first(self.loader([3, 4, 5, 6, 30, 2, 9, 9])))
        self.assertEqual([tuple(b.shape) for b in first], [(2, 4), (2, 30), (2, 9), (2, 6)])

    def test_the_last_loader_before_the_first_step_is_the_one(self):
        # A validation loader whose shapes vary, looked at before training
        # (Lightning's sanity check), then the training loader.
        val = self.loader([3, 4, 5, 6, 30, 2, 9, 9])
        for batch in self.take(self.first(val)):
            loader._note(batch, True)
        self.assertTrue(batches.log.planned_varied)

        class Stream(torch.utils.data.IterableDataset):
            def __iter__(self):
                return iter([[1], [1, 2]])

        self.assertIsNone(self.first(torch.utils.data.DataLoader(Stream(), batch_size=None)))
        self.assertIsNone(batches.log.pending)
        batches.note({"batch": [2]}, "dataloader")
        batches.on_step(1)
        fields = batches.event_fields(1)
        self.assertFalse(fields["worst_first"])
        self.assertEqual(fields["worst_steps"], 0)
        self.assertFalse(fields["varied"])
        self.assertNotIn("scan_seconds", fields)
        self.assertIsNone(batches.log.planned_largest)
        self.assertEqual(batches.log.why_not, "iterable dataset")

    def test_a_loader_iterated_again_keeps_its_plan(self):
        train = self.loader([3, 4, 5, 6, 30, 2, 9, 9])
        self.first(train)
        self.assertIsNone(self.first(self.loader([5] * 8)))  # a fixed-shape loader
        self.assertFalse(batches.log.planned_varied)
        self.assertIsNotNone(self.first(train))
        self.assertTrue(batches.log.planned_varied)
        self.assertEqual(batches.log.planned_largest, {"batch": [2, 30]})
        self.assertEqual(batches.log.scanned_batches, 4)

    def test_gradient_accumulation_meets_the_largest_after_step_one(self):
        # Two batches a step: the epoch's own first, the largest until
        # step 2 has run, then the next largest until the last step, which
        # takes the loader's own.
        lengths = [8 + i for i in range(22)] + [48, 48]
        for per_step, stop_at, want in (
                (2, 3, [11] + [48] * 3),
                (2, 4, [11] + [48] * 3 + [27, 23]),
                (3, 3, [11] + [48] * 5)):
            with mock.patch.object(state, "stop_at", stop_at):
                data = self.loader(lengths)
                data.batch_sampler.batch_size = 4
                first = self.take(self.first(data), per_step)
            self.assertEqual([b.shape[1] for b in first], want, (per_step, stop_at))

    def test_a_fetcher_a_batch_ahead_meets_the_largest_at_step_two(self):
        # Lightning's and accelerate's fetchers ask for batch 2 before step
        # 1 runs: the largest runs at step 2 all the same.
        with mock.patch.object(state, "stop_at", 3):
            first = self.first(self.loader([3, 4, 5, 6, 30, 2, 9, 9]))
            ahead, ran = [next(first)], []
            for _ in range(3):
                ahead.append(next(first, None))  # fetched before the step runs
                ran.append(ahead.pop(0))
                state.steps += 1
        self.assertEqual([b.shape[1] for b in ran], [4, 30, 30])

    def test_steps_never_counted_end_what_is_served(self):
        with mock.patch.object(state, "stop_at", 3):
            first = list(self.first(self.loader([3, 4, 5, 6, 30, 2, 9, 9])))
        self.assertEqual(len(first), loader._MAX_SERVED)

    def test_a_soak_measures_a_few_and_keeps_its_epoch(self):
        # A soak's step limit is far off: its scan still collates only
        # the candidates for DEFAULT_FIRST batches before the first step,
        # and the epoch, its first batch then the largest first, has the
        # loader's length.
        lengths = list(range(1, 201))
        data = self.loader(lengths)
        pad = data.collate_fn
        calls = []
        data.collate_fn = lambda items: calls.append(1) or pad(items)
        with mock.patch.object(state, "stop_at", 10 ** 9), mock.patch.dict(os.environ, {loader.SOAK_ENV: "1"}):
            first = self.first(data)
            self.assertLessEqual(len(calls), 2 * max(loader.DEFAULT_FIRST * loader._CANDIDATES, 8) + 2)
            served = self.take(first)
        self.assertEqual(len(served), len(data))
        self.assertEqual([b.shape[1] for b in served[:4]], [2, 200, 198, 196])
        self.assertEqual(sorted(b.shape[1] for b in served[1:]), [2 * i for i in range(2, 101)])

    def test_the_repeat_is_the_batch_measured(self):
        # Items are random crops, and the program pops the labels; two
        # batches a step: step 2's second batch is its first all the same.
        import random as stdlib_random

        class Crops(torch.utils.data.Dataset):
            def __len__(self):
                return 40

            def __getitem__(self, i):
                n = stdlib_random.randint(8, 64)
                return {"ids": torch.arange(n), "labels": torch.arange(n)}

        def pad(items):
            longest = max(len(x["ids"]) for x in items)
            ids = torch.zeros(len(items), longest, dtype=torch.long)
            for j, x in enumerate(items):
                ids[j, : len(x["ids"])] = x["ids"]
            return {"ids": ids, "labels": ids.clone()}

        stdlib_random.seed(0)
        data = torch.utils.data.DataLoader(Crops(), batch_size=4, collate_fn=pad)
        seen = []
        for batch in self.first(data):
            seen.append((sorted(batch), batch["ids"].clone()))
            batch.pop("labels")
            batch["ids"].zero_()
            if len(seen) % 2 == 0:
                state.steps += 1
            if len(seen) == 4:
                break
        self.assertEqual(seen[3][0], ["ids", "labels"])
        self.assertTrue(torch.equal(seen[2][1], seen[3][1]))
        self.assertEqual(list(seen[3][1].shape), batches.log.planned_largest["ids"])

    def test_a_batch_on_a_device_is_not_copied(self):
        class Device:
            type = "cuda"

        class OnDevice:
            device = Device()

        self.assertTrue(loader._on_cpu({"ids": torch.zeros(2), "n": 3, "x": [torch.zeros(1)]}))
        self.assertFalse(loader._on_cpu({"ids": torch.zeros(2), "mask": [OnDevice()]}))

    def test_an_oom_while_serving_is_the_programs(self):
        # A collate_fn that builds batches on the GPU can run out of memory
        # making one that is served: the error reaches the program; any
        # other error of serving gives way to the loader's own batches. In
        # a process of its own: the wrapping of DataLoader is for good.
        program = textwrap.dedent(f"""
            import sys, torch, torch.utils.data.dataloader as dl
            sys.path.insert(0, {os.path.join(os.path.dirname(__file__), "..")!r})
            from batchfit._runtime import loader
            loader.dataloader_imported(dl)
            data = torch.utils.data.DataLoader([[1, 2], [3, 4]], batch_size=1)
            for error in (RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"), ValueError("ours")):
                it = iter(data)
                def failing(error=error):
                    raise error
                    yield
                it.__dict__["_batchfit_first"] = failing()
                try:
                    print(type(error).__name__, "served", next(it))
                except RuntimeError as e:
                    print(type(error).__name__, "raised")
        """)
        out = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
        self.assertEqual(out.returncode, 0, out.stderr)
        lines = out.stdout.splitlines()
        self.assertEqual(lines[0], "RuntimeError raised")
        self.assertTrue(lines[1].startswith("ValueError served"), lines)

    def test_scan_time_bound(self):
        with mock.patch.dict(os.environ, {loader.SCAN_SECONDS_ENV: "0.000001"}):
            self.assertIsNone(self.first(self.loader(list(range(1, 200)))))
        self.assertEqual(batches.log.why_not, "scan timed out after 1e-06 s")

    def test_only_before_a_stopped_trial_or_a_soak_steps(self):
        with mock.patch.object(state, "steps", 1):
            self.assertIsNone(self.first(self.loader([3, 30, 4, 5])))
        with mock.patch.object(state, "path", None):
            self.assertIsNone(self.first(self.loader([3, 30, 4, 5])))
        with mock.patch.object(state, "stop_at", 0):  # run to its end
            self.assertIsNone(self.first(self.loader([3, 30, 4, 5])))
            with mock.patch.dict(os.environ, {loader.SOAK_ENV: "1"}):
                first = self.first(self.loader([3, 30, 4, 5]))
        # A soak's epoch keeps its length: the repeat replaces its smallest.
        self.assertEqual([tuple(b.shape) for b in self.take(first)], [(2, 30), (2, 30)])

    def test_iterable_and_unsized(self):
        class Stream(torch.utils.data.IterableDataset):
            def __iter__(self):
                return iter([[1], [1, 2]])

        self.assertIsNone(self.first(torch.utils.data.DataLoader(Stream(), batch_size=None)))
        self.assertEqual(batches.log.why_not, "iterable dataset")

        class Unsized(torch.utils.data.Sampler):
            def __iter__(self):
                return iter([[0, 1], [2, 3]])

        data = self.loader([1, 2, 3, 4])
        data = torch.utils.data.DataLoader(data.dataset, batch_sampler=Unsized(None), collate_fn=data.collate_fn)
        self.assertIsNone(self.first(data))
        self.assertEqual(batches.log.why_not, "sampler not sized")


@unittest.skipIf(torch is None, "needs torch")
class ForwardHookTest(unittest.TestCase):
    def setUp(self):
        batches.reset()
        self.addCleanup(batches.reset)
        import torch.nn.modules.module as module

        self.hooks = module._global_forward_pre_hooks

    def test_reads_the_outermost_module(self):
        before = len(self.hooks)
        torch_steps._watch_forward(torch)
        self.assertEqual(len(self.hooks), before + 1)
        model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.Linear(8, 1))
        model(torch.zeros(3, 4))
        batches.on_step(1)
        self.assertEqual(batches.event_fields(1)["shapes"], [{"arg0": [3, 4]}])
        batches.note({"batch": [3, 4]}, "dataloader")
        model(torch.zeros(3, 4))
        batches.on_step(2)
        self.assertEqual(len(self.hooks), before + 1)  # step 1's may be a validation loader's
        batches.note({"batch": [3, 4]}, "dataloader")
        batches.on_step(3)
        model(torch.zeros(3, 4))  # a step after the first took a DataLoader's: the hook goes
        self.assertEqual(len(self.hooks), before)
        self.assertEqual(batches.event_fields(3)["shapes"], [{"arg0": [3, 4]}, {"batch": [3, 4]}, {"batch": [3, 4]}])

    def test_a_validation_loader_before_batches_of_its_own(self):
        # A fixed-shape validation DataLoader looked at before training;
        # training slices its own batches, growing.
        before = len(self.hooks)
        torch_steps._watch_forward(torch)
        self.addCleanup(lambda: [self.hooks.pop(k) for k in list(self.hooks)[before:]])
        model = torch.nn.Linear(4, 1)
        batches.log.why_not = "40 of 40 items read, of one shape"
        for _ in range(2):
            batches.note({"0": [4, 16]}, "dataloader")
            model(torch.zeros(4, 4))
        for step, n in enumerate([11, 15, 19], start=1):
            model(torch.zeros(n, 4))
            batches.on_step(step)
        fields = batches.event_fields(3)
        self.assertEqual(fields["shapes"], [{"0": [4, 16]}, {"arg0": [15, 4]}, {"arg0": [19, 4]}])
        self.assertTrue(fields["varied"])
        self.assertEqual(fields["why_not"], "no DataLoader")
        self.assertEqual(fields["source"], "forward")
        self.assertEqual(len(self.hooks), before + 1)
        self.assertTrue(batches.keep_going(3, 3))

    def test_a_batch_without_tensors_leaves_it_to_the_module(self):
        class Graphs:
            """A graph library's batch: tensors behind attributes."""

            def __init__(self, x):
                self.x = x

        class Items(torch.utils.data.Dataset):
            def __len__(self):
                return 4

            def __getitem__(self, i):
                return torch.zeros(5, 3)

        import torch.utils.data.dataloader as dataloader

        for cls, name in ((dataloader.DataLoader, "__iter__"), (dataloader._BaseDataLoaderIter, "__next__")):
            self.addCleanup(setattr, cls, name, cls.__dict__[name])
        loader.dataloader_imported(dataloader)
        data = torch.utils.data.DataLoader(Items(), batch_size=2, collate_fn=lambda items: Graphs(torch.cat(items)))
        before = len(self.hooks)
        torch_steps._watch_forward(torch)
        model = torch.nn.Linear(3, 1)
        for graphs in data:
            model(graphs.x)
            break
        batches.on_step(1)
        self.assertEqual(batches.event_fields(1)["shapes"], [{"arg0": [10, 3]}])
        self.assertEqual(batches.event_fields(1)["source"], "forward")
        import torch.nn.modules.module as module

        for key in list(self.hooks)[before:]:  # the hook stays: no DataLoader batch was seen
            module._global_forward_pre_hooks.pop(key)

    @unittest.skipIf(torch is not None and importlib.util.find_spec("torch._dynamo") is not None,
                     "a torch with a real torch._dynamo")
    def test_gone_once_dynamo_loads(self):
        before = len(self.hooks)
        torch_steps._watch_forward(torch)
        self.assertEqual(len(self.hooks), before + 1)
        with tempfile.TemporaryDirectory() as stand_in:
            open(os.path.join(stand_in, "_dynamo.py"), "w").close()
            torch.__path__.append(stand_in)
            try:
                importlib.import_module("torch._dynamo")  # as torch.compile does
            finally:
                torch.__path__.remove(stand_in)
                sys.modules.pop("torch._dynamo", None)
        self.assertEqual(len(self.hooks), before)


if __name__ == "__main__":
    unittest.main()
