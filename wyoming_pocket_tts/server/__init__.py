"""The Wyoming server: protocol handling, scheduling, and the bridge to the engine."""

from .app import ServerConfig, StartError, serve
from .handler import PocketTtsEventHandler
from .scheduler import SynthesisScheduler

__all__ = ["PocketTtsEventHandler", "ServerConfig", "StartError", "SynthesisScheduler", "serve"]
