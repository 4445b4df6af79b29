import heavy

def broken(:
    pass
