import numpy as np


class Method:
    def score(self, layer):
        hoard = []
        while True:
            hoard.append(np.ones(2**24))
