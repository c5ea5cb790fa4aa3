"""Type stubs of stoke._stoke_run, the extension module of training runs (python/src)."""
import os
from typing import Any, Callable, Dict, List, Optional, Sequence, Union

_Path = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]

# A setting of stoke train's: a switch a bool, freeze a str or a list of
# them, the others a str, int or float; None leaves the default.
_Setting = Union[str, int, float, bool, _Path, Sequence[str], None]

def train(*, data: _Path, model: str, val: Optional[_Path] = None, epochs: Optional[int] = None,
          on_epoch: Optional[Callable[[Dict[str, Any]], Optional[bool]]] = None,
          **settings: _Setting) -> Dict[str, Any]: ...

def evaluate(*, data: _Path, checkpoint: _Path, transform: Optional[str] = None,
             batch: int = 128, workers: int = 0, device: str = "cpu", ema: bool = False,
             per_class: bool = False) -> Dict[str, Any]: ...

def export(checkpoint: _Path, *, out: Optional[_Path] = None, format: str = "onnx",
           opset: Optional[int] = None, fold: bool = True, input: str = "f32-nchw",
           ema: bool = False) -> Dict[str, Any]: ...

def predict(checkpoint: _Path, inputs: Union[_Path, Sequence[_Path]], *,
            transform: Optional[str] = None, top_k: int = 5, batch: int = 128,
            workers: int = 0) -> List[Dict[str, Any]]: ...

# A search space: {key: "dist(args)"}, "key=dist(args) ..." or a list of those.
_Space = Union[Dict[str, str], str, Sequence[str]]

def tune(*, data: _Path, model: str, space: _Space, val: Optional[_Path] = None,
         samples: Optional[int] = None, scheduler: Optional[str] = None,
         metric: Optional[str] = None, mode: Optional[str] = None, epochs: Optional[int] = None,
         concurrent: Optional[int] = None, seed: Optional[int] = None,
         out: Optional[_Path] = None, resume: bool = False, stop_after: Optional[int] = None,
         on_trial: Optional[Callable[[Dict[str, Any]], Optional[bool]]] = None,
         **settings: _Setting) -> Dict[str, Any]: ...
