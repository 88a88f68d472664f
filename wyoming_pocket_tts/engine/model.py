"""A loaded model: voices in, text in, 80 ms frames of audio out.

The network's weights are shared and never written after loading, so any number of
threads may synthesize at once; everything a request writes (its KV cache, decoder state
and noise generator) belongs to that request's `SpeechSession`.
"""

from __future__ import annotations

import logging
import math
import secrets
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from .audio import end_on_pause, read_recording
from .batch import ChunkRow, Batcher
from .config import ModelConfig
from ..core.errors import ModelLoadError, TextError, VoiceError
from .hub import HubAccess, resolve
from .kernels import inference
from .mimi import lay_out_convolutions
from .network import PocketNetwork, load_encoder
from ..core.options import GenerationOptions
from .text import TextRules, prepare, split_into_chunks
from .tokenizer import Tokenizer
from .voice import VoiceState, load_voice_state, save_voice_state

logger = logging.getLogger(__name__)

# Speech is estimated at 3 tokens per second, plus 2 s of slack: the hard cap on a chunk.
TOKENS_PER_SECOND = 3.0
EXTRA_SECONDS = 2.0
FADE_IN_SECONDS = 0.005
# Bounds the text work of one call (chunking 20,000 characters takes ~0.2 s); memory is
# bounded per chunk whatever the length. Callers bound what they accept from clients.
MAX_TEXT_CHARS = 200_000


@dataclass(frozen=True)
class ModelInfo:
    name: str
    model_id: str
    languages: tuple[str, ...]
    predefined_voices: tuple[str, ...]
    can_clone: bool


class TTSModel:
    def __init__(self, network: PocketNetwork, tokenizer: Tokenizer, config: ModelConfig, info: ModelInfo,
                 voice_state_paths: dict[str, str], hub: HubAccess, encoder_file: Path | None = None) -> None:
        """`encoder_file`: where the voice encoder's weights wait until a voice is first
        encoded (None: they are loaded, or the model cannot clone)."""
        # Cores a request may use while only one of its two threads (FlowLM, decoder) works.
        self.threads = max(1, torch.get_num_threads())
        self.network = network.eval().requires_grad_(False)
        # Everything derived from the weights is made here, before any request can see them.
        network.flow_lm.flow_net.fuse_modulations()
        lay_out_convolutions(network.mimi)
        self.tokenizer = tokenizer
        self.config = config
        # "float32", or "int8/<engine>" once quantized (loading.quantize_model).
        self.precision = "float32"
        self.info = info
        self._voice_state_paths = voice_state_paths
        self._hub = hub
        self._encoder_file = encoder_file
        self._encoder_lock = threading.Lock()
        self.text_rules = TextRules(
            pad_short_inputs=config.pad_with_spaces_for_short_inputs,
            remove_semicolons=config.remove_semicolons,
            append_terminal_punctuation=config.append_terminal_punctuation,
            capitalize_first_letter=config.capitalize_first_letter,
            replace_characters=dict(config.replace_characters),
        )
        transformer = network.flow_lm.transformer
        self._state_shape = (len(transformer.layers), transformer.num_kv_heads, transformer.head_dim)
        # Every reply being spoken, stepped together (its threads start with the first).
        self.batcher = Batcher(self, network.flow_lm, self.threads)

    # -- facts -------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.info.name

    @property
    def model_id(self) -> str:
        return self.info.model_id

    @property
    def languages(self) -> list[str]:
        return list(self.info.languages)

    @property
    def predefined_voices(self) -> tuple[str, ...]:
        return self.info.predefined_voices

    @property
    def can_clone(self) -> bool:
        return self.info.can_clone

    @property
    def sample_rate(self) -> int:
        return self.network.mimi.sample_rate

    @property
    def frame_size(self) -> int:
        return self.network.mimi.frame_size

    # -- voices ------------------------------------------------------------------------
    @inference()
    def voice_from_audio(self, audio: torch.Tensor | np.ndarray) -> VoiceState:
        """Encode 24 kHz mono audio (a tensor [1, samples], or float32 samples) into a voice state."""
        if not self.can_clone:
            raise VoiceError(
                "voice cloning needs the gated weights of kyutai/pocket-tts: accept the terms "
                "at https://huggingface.co/kyutai/pocket-tts and pass a read token "
                "(--hf-token or HF_TOKEN); predefined voices work without it"
            )
        self._load_encoder()
        audio = torch.as_tensor(audio, dtype=torch.float32)
        prompt_audio = end_on_pause(audio.unsqueeze(0) if audio.dim() == 1 else audio, self.sample_rate)
        latents = self.network.mimi.encode(prompt_audio.unsqueeze(0))
        flow_lm = self.network.flow_lm
        prompt = flow_lm.voice_prompt(latents)
        caches = flow_lm.transformer.new_caches(self._empty_prefix(), capacity=prompt.shape[1])
        flow_lm.prefill(prompt, caches)
        return VoiceState(self.model_id, tuple((c.k, c.v) for c in caches))  # exactly the prompt's size

    def _load_encoder(self) -> None:
        with self._encoder_lock:
            if self._encoder_file is None:
                return
            logger.info("loading the voice encoder from %s", self._encoder_file)
            try:
                load_encoder(self.network, self._encoder_file)
            except ModelLoadError as err:
                raise VoiceError(f"the voice encoder cannot be loaded: {err}") from None
            lay_out_convolutions(self.network.mimi)
            self._encoder_file = None

    def voice_from_recording(self, path: str | Path) -> VoiceState:
        path = Path(path)
        return self.voice_from_audio(read_recording(path, self.sample_rate))

    def voice_from_file(self, path: str | Path) -> VoiceState:
        return load_voice_state(Path(path), self.model_id, *self._state_shape)

    def voice_from_predefined(self, name: str) -> VoiceState:
        hub_path = self._voice_state_paths.get(name)
        if hub_path is None:
            known = ", ".join(self.predefined_voices) or "none"
            raise VoiceError(f"model {self.name} has no predefined voice {name!r} (it has: {known})")
        try:
            local = resolve(hub_path, self._hub)
        except Exception as err:  # noqa: BLE001 -- a download failure is a voice failure here
            raise VoiceError(f"predefined voice {name!r} is unavailable: {err}") from None
        return load_voice_state(local, self.model_id, *self._state_shape)

    def save_voice(self, state: VoiceState, path: str | Path) -> None:
        save_voice_state(state, Path(path))

    def _empty_prefix(self) -> list[tuple[torch.Tensor, torch.Tensor]]:
        layers, kv_heads, head_dim = self._state_shape
        empty = torch.zeros(1, kv_heads, 0, head_dim)
        return [(empty, empty)] * layers

    # -- speech ------------------------------------------------------------------------
    def session(self, voice: VoiceState, options: GenerationOptions = GenerationOptions(),
                cancel: threading.Event | None = None) -> SpeechSession:
        return SpeechSession(self, self.check_voice(voice), options, cancel or threading.Event())

    def check_voice(self, voice: VoiceState) -> VoiceState:
        """`voice`, or a VoiceError if it was made for another model."""
        if voice.model_id != self.model_id:
            raise VoiceError(f"this voice was made for model {voice.model_id!r}, not {self.model_id!r}")
        return voice

    def synthesize(self, text: str, voice: VoiceState, options: GenerationOptions = GenerationOptions(),
                   cancel: threading.Event | None = None) -> Iterator[np.ndarray]:
        """Frames for `text`, each chunk from a fresh decoder, exactly as upstream does."""
        session = self.session(voice, options, cancel)
        chunks = self.chunk_text(text, options.max_tokens_per_chunk)
        return session.speak_chunks(chunks, fresh_decoder_per_chunk=True)

    def chunk_text(self, text: str, max_tokens: int | None = None) -> list[str]:
        if len(text) > MAX_TEXT_CHARS:
            raise TextError(f"the text has {len(text)} characters; at most {MAX_TEXT_CHARS} are spoken at once")
        if not any(char.isalnum() for char in text):
            raise TextError("the text has nothing to pronounce (no letters or digits)")
        return split_into_chunks(text, self.tokenizer, self.text_rules,
                                 max_tokens or GenerationOptions().max_tokens_per_chunk)


class SpeechSession:
    """One response: a voice, sampling settings, a noise generator and an audio decoder.

    Successive `speak` calls continue the same decoder, so sentences fed one by one join
    without a click or a gap. Each text chunk is spoken as a row of the model's batcher
    (engine/batch.py), stepped together with every other reply being spoken. Not
    thread-safe: its calls may come from different threads, but one at a time.
    """

    def __init__(self, model: TTSModel, voice: VoiceState, options: GenerationOptions, cancel: threading.Event) -> None:
        self.model = model
        self.voice = voice
        self.cancel = cancel
        config = model.config
        self.temperature = config.default_temperature if options.temperature is None else options.temperature
        self.eos_threshold = config.default_eos_threshold if options.eos_threshold is None else options.eos_threshold
        self.options = options
        # Without a seed, a fresh one: never from torch's global generator, which other
        # requests (and libraries) share.
        seed = options.seed if options.seed is not None else secrets.randbits(63)
        self.generator = torch.Generator().manual_seed(seed)
        self.decoder = model.network.mimi.new_decoder_state()

    def speak(self, text: str, voice: VoiceState | None = None) -> Iterator[np.ndarray]:
        """`text` in `voice` (None: the session's own), continuing the same decoder: another
        voice within a reply (SSML <voice>) joins as seamlessly as the next sentence."""
        voice = self.voice if voice is None else self.model.check_voice(voice)
        chunks = self.model.chunk_text(text, self.options.max_tokens_per_chunk)
        return self.speak_chunks(chunks, fresh_decoder_per_chunk=False, voice=voice)

    def speak_chunks(self, chunks: list[str], fresh_decoder_per_chunk: bool,
                     voice: VoiceState | None = None) -> Iterator[np.ndarray]:  # fmt: skip
        for chunk in chunks:
            if self.cancel.is_set():
                return
            if fresh_decoder_per_chunk:
                self.decoder = self.model.network.mimi.new_decoder_state()
            yield from self._speak_chunk(chunk, voice or self.voice)

    def _frames_after_eos(self, guess: int) -> int:
        recommended = self.model.config.model_recommended_frames_after_eos
        return recommended if recommended is not None else guess + 2

    def _noise(self) -> torch.Tensor:
        """This reply's noise for one step, from its own generator (in the batcher's threads)."""
        noise = torch.zeros(1, self.model.network.flow_lm.latent_dim)
        if self.temperature > 0:
            noise.normal_(0.0, self.temperature**0.5, generator=self.generator)
        return noise

    def _speak_chunk(self, chunk: str, voice: VoiceState) -> Iterator[np.ndarray]:
        plan = self._plan(chunk)
        flow_lm = self.model.network.flow_lm
        with inference():
            caches = flow_lm.transformer.new_caches(list(voice.layers), capacity=len(plan.ids) + plan.max_frames)
        row = ChunkRow(caches, torch.tensor([plan.ids]), plan.max_frames, plan.frames_after_eos, self.eos_threshold,
                       self.options.decode_steps, self._noise, self._decode_group, self.cancel,
                       self.model.frame_size)  # fmt: skip
        self.model.batcher.submit(row)
        yield from row.frames(self.model.batcher)

    def _plan(self, chunk: str) -> ChunkPlan:
        prepared = prepare(chunk, self.model.text_rules)
        ids = self.model.tokenizer.encode(prepared.text)
        max_frames = math.ceil((len(ids) / TOKENS_PER_SECOND + EXTRA_SECONDS) * self.model.network.mimi.frame_rate)
        return ChunkPlan(ids, max_frames, self._frames_after_eos(prepared.frames_after_eos))

    def _decode_group(self, group: torch.Tensor) -> np.ndarray:
        """Audio [frames * frame_size] for latents [1, frames, dim], continuing the decoder."""
        model = self.model
        flow_lm, mimi = model.network.flow_lm, model.network.mimi
        with inference():
            fresh = self.decoder.frames_decoded == 0
            audio = mimi.decode(group * flow_lm.emb_std + flow_lm.emb_mean, self.decoder)[0, 0]
            if fresh:
                # A fresh decoder starts with a small step: fade it in so it is not a click.
                fade = torch.linspace(0, 1, int(model.sample_rate * FADE_IN_SECONDS))
                audio[: fade.numel()] *= fade
        return audio.numpy().copy()


@dataclass(frozen=True)
class ChunkPlan:
    ids: list[int]
    max_frames: int
    frames_after_eos: int
