"""The one compiled part: the kernels of batched steps (native/), float32 and int8.

Everything else is in pyproject.toml. The kernels are a plain shared library, loaded with
ctypes by wyoming_pocket_tts/engine/rows_kernel.py, installed as a top-level module so
that it is found from a source checkout too. It is optional: without a C compiler the
install goes on, and the engine batches with torch's kernels (slower with several
replies at once; the same audio per reply either way).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "wyoming_pocket_tts_rows",
            sources=["native/rows_linear.c", "native/rows_int8.c"],
            depends=["native/rows_int8_body.h"],
            # Fused multiply-adds where the CPU has them (GCC's default for GNU C, said
            # here for other compilers); never -ffast-math, which would let the compiler
            # reorder the sums the kernel fixes.
            extra_compile_args=["-O3", "-ffp-contract=fast"],
            optional=True,
        )
    ]
)
