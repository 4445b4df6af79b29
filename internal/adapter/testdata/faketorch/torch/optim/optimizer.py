_post_hooks = []


def register_optimizer_step_post_hook(hook):
    _post_hooks.append(hook)


class Optimizer(object):
    def step(self):
        for hook in _post_hooks:
            hook(self, (), {})
