"""The embedded default model: its tokenizer, training recipe and loop (``cachecraft train-tiny``) and card.

``recipe`` (stages, schedule, loading and extending a recipe), ``samples`` (training rows), ``batches``
(the batch of each step and its mask), ``losses``, ``train`` (the loop), ``render`` (KVPress's rendering),
``tokenizer``; ``measure`` (RULER scores through KVPress's pipeline), ``diagnose`` (list answers with
repeats banned), ``card`` (the model card, ``cachecraft tiny-card``).
"""
