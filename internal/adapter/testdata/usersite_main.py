import sys

print("sitecustomize module:", sys.modules["sitecustomize"].__file__)
print("user path kept:", "/nonexistent/added-by-user-sitecustomize" in sys.path)
