def tree_leaves(tree):
    if isinstance(tree, (list, tuple)):
        return [leaf for t in tree for leaf in tree_leaves(t)]
    if isinstance(tree, dict):
        return [leaf for k in sorted(tree) for leaf in tree_leaves(tree[k])]
    return [] if tree is None else [tree]


def tree_map(f, tree):
    if isinstance(tree, (list, tuple)):
        return type(tree)(tree_map(f, t) for t in tree)
    if isinstance(tree, dict):
        return {k: tree_map(f, v) for k, v in tree.items()}
    return None if tree is None else f(tree)


def tree_flatten(tree):
    """The leaves and the tree's structure, as a string with "*" for each leaf."""
    return tree_leaves(tree), repr(tree_map(lambda _: "*", tree))
