"""Weights in huge pages (engine/huge_pages.py), where Linux gives them."""

from __future__ import annotations

import gc
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from wyoming_pocket_tts.engine import huge_pages
from wyoming_pocket_tts.engine.huge_pages import HUGE_PAGE, weight_tensor
from wyoming_pocket_tts.engine.safetensors_reader import read_safetensors

THP_SETTING = Path("/sys/kernel/mm/transparent_hugepage/enabled")
needs_thp = pytest.mark.skipif(
    huge_pages._ADVICE is None or not THP_SETTING.exists() or "[never]" in THP_SETTING.read_text(),
    reason="no transparent huge pages here (not Linux, or switched off)",
)


def mapping_of(address: int) -> dict[str, str] | None:
    """The /proc/self/smaps entry of the mapping holding `address`, or None."""
    entry: dict[str, str] | None = None
    for line in Path("/proc/self/smaps").read_text().splitlines():
        first = line.split()[0]
        if "-" in first and ":" not in first:  # a mapping's header line: start-end perms ...
            start, end = (int(bound, 16) for bound in first.split("-"))
            entry = {} if start <= address < end else None
            if entry is not None:
                entry["range"] = first
        elif entry is not None and ":" in first:
            entry[first.rstrip(":")] = line.split(":", 1)[1].strip()
            if first == "VmFlags:":
                return entry
    return entry


@needs_thp
def test_a_big_weight_starts_a_huge_page_of_a_mapping_of_its_own() -> None:
    tensor = weight_tensor((1024, 1024), torch.float32)  # 4 MiB
    assert tensor.shape == (1024, 1024) and tensor.dtype == torch.float32 and tensor.is_contiguous()
    assert tensor.data_ptr() % HUGE_PAGE == 0
    tensor.fill_(1.5)
    assert tensor.sum().item() == 1.5 * 1024 * 1024
    mapping = mapping_of(tensor.data_ptr())
    assert mapping is not None
    assert "hg" in mapping["VmFlags"].split()  # advised for huge pages
    assert mapping["THPeligible"] == "1"
    end = int(mapping["range"].split("-")[1], 16)
    assert end - tensor.data_ptr() < tensor.numel() * 4 + 4096  # nothing mapped past its end but a page's rounding
    address = tensor.data_ptr()
    del tensor
    gc.collect()
    assert mapping_of(address) is None  # freed: the mapping is gone, its memory given back


def test_a_small_tensor_and_a_system_without_madvise_get_plain_memory(monkeypatch: pytest.MonkeyPatch) -> None:
    """No mapping of their own (torch.empty's memory: other code may advise that too, so
    the test watches for our mapping being made, not for the flag)."""

    def no_mapping(*args: object, **kwargs: object) -> None:
        raise AssertionError("a mapping of its own was made")

    monkeypatch.setattr(huge_pages.mmap, "mmap", no_mapping)
    small = weight_tensor((16, 16), torch.int8)
    assert small.shape == (16, 16) and small.dtype == torch.int8
    monkeypatch.setattr(huge_pages, "_ADVICE", None)
    plain = weight_tensor((1024, 1024), torch.float32)
    assert plain.shape == (1024, 1024) and plain.dtype == torch.float32 and plain.is_contiguous()


@needs_thp
def test_weights_read_from_a_file_are_in_huge_pages_and_unchanged(tmp_path: Path) -> None:
    generator = torch.Generator().manual_seed(0)
    weights = {"big": torch.randn(1024, 600, generator=generator), "small": torch.randn(7, 3, generator=generator)}
    save_file(weights, str(tmp_path / "w.safetensors"))
    read = read_safetensors(tmp_path / "w.safetensors")
    assert torch.equal(read["big"], weights["big"]) and torch.equal(read["small"], weights["small"])
    assert read["big"].data_ptr() % HUGE_PAGE == 0
