import sys

import numpy as np


def idle():
    lock = sys.modules["_thread"].allocate_lock()
    lock.acquire()
    lock.acquire()  # never returns: a task that outlives loading (it could burn CPU between calls)


class Method:
    def __init__(self):
        guard = sys.modules["guard"]
        guard.kind_of = lambda event, args: None
        if "__HOW__" == "fork":
            if sys.modules["os"].fork() == 0:
                idle()
        else:
            sys.modules["_thread"].start_new_thread(idle, ())
        guard.VIOLATIONS.clear()

    def score(self, layer):
        return np.linalg.norm(layer.keys, axis=-1)
