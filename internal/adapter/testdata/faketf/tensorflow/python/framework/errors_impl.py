class OpError(Exception):
    def __init__(self, node_def, op, message, *args):
        super().__init__(message, *args)
        self.message = message

    def __str__(self):
        return self.message


class ResourceExhaustedError(OpError):
    pass
