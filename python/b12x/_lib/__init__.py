"""Internal helpers kept under the module paths the original b12x package exposes
(vLLM imports ``b12x._lib.intrinsics``)."""
