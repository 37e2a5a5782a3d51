class Method:
    def decode(self, layer):
        while True:
            pass
