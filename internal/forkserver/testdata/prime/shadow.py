# The program's own shadow, found before site-packages' (sys.path[0]).
WHERE = "user"
