"""A module without torch, for tests of target loading."""


class Plain(object):
    def step(self, batch_size):
        pass
