"""What runs inside a trial's own process: the start-up hook and its report
(hook, with frameworks), the fork server's children (forkserver) and the
warm worker (worker, trial). Every module here keeps to the rules of code
that runs inside someone else's program: no framework is imported before
the program imports it, and an error of the adapter's own never changes
what the program does.

The public names are batchfit.hook, batchfit.worker and batchfit.forkserver
(python -m batchfit.worker, python -m batchfit.forkserver); this package is
the adapter's own and may change.
"""
