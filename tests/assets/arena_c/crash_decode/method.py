class Method:
    def decode(self, layer):
        raise RuntimeError("boom in decode")
