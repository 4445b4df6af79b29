# A stand-in for optax: GradientTransformation as the NamedTuple it is, a
# subclass that inherits its update field, and chain() whose update calls its
# parts' updates, as optax's own transformations do.
from typing import Any, NamedTuple

import jax  # noqa: F401  optax imports jax first

updates = 0  # update function bodies run


class GradientTransformation(NamedTuple):
    init: Any
    update: Any


class GradientTransformationExtraArgs(GradientTransformation):
    pass


def scale(factor):
    def init(params):
        return ()

    def update(grads, state, params=None):
        global updates
        updates += 1
        return grads, state

    return GradientTransformationExtraArgs(init, update)


def chain(*transforms):
    def init(params):
        return tuple(t.init(params) for t in transforms)

    def update(grads, state, params=None):
        states = []
        for t, s in zip(transforms, state):
            grads, s = t.update(grads, s, params)
            states.append(s)
        return grads, tuple(states)

    return GradientTransformationExtraArgs(init, update)


def sgd(learning_rate):
    return chain(scale(1.0), scale(-learning_rate))


def apply_updates(params, grads):
    return params
