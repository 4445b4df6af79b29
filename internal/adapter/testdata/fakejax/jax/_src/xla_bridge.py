# The backend registry, as jax keeps it: empty until the first device use,
# which goes through backends(), as in jax.
_backends = {}


def backends_are_initialized():
    return len(_backends) != 0


def backends():
    from jax import _make_backends

    return _make_backends()
