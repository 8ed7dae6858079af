"""What the three scripts of the staged experiment share: the frozen text, the held-out
windows and the checkpoint's format (one home for each, so that train, evaluate and load agree).

A checkpoint is a folder: ``model.npz`` (every parameter tensor of ptreg's TinyGPT, by name)
and ``meta.json`` (the config's name, the learning rate, steps and seed it was trained with,
and its last training loss). Both are written to a temporary name and renamed, so a stage
killed while saving leaves no half checkpoint under the real name.
"""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

import numpy as np

from ptreg.engine.workloads.tinygpt import ReferenceKernels, TinyGPT
from ptreg.records.configs import CONFIGS

# The warm-up example's generated corpus, committed and held equal to its generator's output
# by tests/examples/test_harnesses.py: the frozen text this experiment trains and evaluates on.
DATA = Path(__file__).resolve().parent.parent / "warmup" / "data"
MODEL_FILE, META_FILE = "model.npz", "meta.json"


def read_split(name: str, data: Path = DATA) -> np.ndarray:
    """A split of the corpus (``train`` or ``heldout``) as bytes."""
    return np.frombuffer((data / f"{name}.txt").read_bytes(), dtype=np.uint8)


def heldout_windows(data: np.ndarray, context: int, limit: int) -> tuple[np.ndarray, np.ndarray]:
    """Non-overlapping windows from byte 0 (each item of the evaluation is one): inputs
    data[i·T : i·T+T], targets shifted by one byte. The same windows for every arm and seed."""
    count = min((len(data) - 1) // context, limit)
    starts = np.arange(count) * context
    index = starts[:, None] + np.arange(context)
    return data[index].astype(np.int64), data[index + 1].astype(np.int64)


def save(folder: Path, model: TinyGPT, meta: dict[str, Any]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    _replace(folder / MODEL_FILE, lambda handle: np.savez(handle, **model.params))
    _replace(folder / META_FILE, lambda handle: handle.write(json.dumps(meta, sort_keys=True).encode() + b"\n"))


def _replace(path: Path, write: Any) -> None:
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def load(folder: Path) -> tuple[TinyGPT, dict[str, Any]]:
    """The model a checkpoint holds, with its meta; ValueError when it does not fit its config."""
    meta = json.loads((folder / META_FILE).read_text(encoding="utf-8"))
    config = CONFIGS[meta["config"]]
    model = TinyGPT(config, ReferenceKernels(), seed=0)
    with np.load(folder / MODEL_FILE, allow_pickle=False) as saved:
        if set(saved.files) != set(model.params):
            raise ValueError(f"{folder / MODEL_FILE}: its tensors are not those of the {config.name} config")
        for name, value in model.params.items():
            stored = saved[name]
            if stored.shape != value.shape:
                raise ValueError(f"{folder / MODEL_FILE}: {name} is {stored.shape}, not {value.shape}")
            value[...] = stored
    return model, meta
