# A module of the program's own that imports a third-party package.
import indirect  # noqa: F401
