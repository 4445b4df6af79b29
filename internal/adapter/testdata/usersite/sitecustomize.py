# A user's own sitecustomize, which must still run under batchfit's hook.
import sys

print("user sitecustomize ran")
sys.path.append("/nonexistent/added-by-user-sitecustomize")
