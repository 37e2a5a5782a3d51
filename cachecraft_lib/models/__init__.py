"""Models: loading and naming them, the instruct model, the shared prefill and the pipelines."""
