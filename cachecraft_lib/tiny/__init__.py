"""The embedded default model: its tokenizer and training recipe (``cachecraft train-tiny``)."""
