# A module of the program's own: the fork server must never import it.
import os

IMPORTED_BY = os.getpid()
if os.environ.get("PRIME_MARKS"):
    with open(os.environ["PRIME_MARKS"], "a") as f:
        f.write(f"mine {IMPORTED_BY}\n")
