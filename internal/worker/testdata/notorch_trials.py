"""A module without torch, for tests of target loading."""


class Plain(object):
    def step(self, batch_size):
        pass


class BadSetup(object):
    def setup(self):
        raise ValueError("cannot read the dataset config")

    def step(self, batch_size):
        pass
