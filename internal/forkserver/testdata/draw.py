import numpy

print(numpy.random.randint(1 << 30), numpy.random.rand())
