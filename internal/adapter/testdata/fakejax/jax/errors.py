from jaxlib.xla_extension import XlaRuntimeError

# As jax 0.4.3x: the public name is the extension's class.
JaxRuntimeError = XlaRuntimeError
