class Tracer(object):
    """What a traced function sees in place of an array."""

    def __init__(self, value=None):
        self.value = value
