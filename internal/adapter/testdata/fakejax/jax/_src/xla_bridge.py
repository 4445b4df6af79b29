# The backend registry, as jax keeps it: empty until the first device use.
_backends = {}


def backends_are_initialized():
    return len(_backends) != 0
