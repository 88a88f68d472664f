"""The one compiled part: the float32 kernel of batched FlowLM steps (native/rows_linear.c).

Everything else is in pyproject.toml. The kernel is a plain shared library, loaded with
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
            sources=["native/rows_linear.c"],
            # Fused multiply-adds where the CPU has them (GCC's default for GNU C, said
            # here for other compilers); never -ffast-math, which would let the compiler
            # reorder the sums the kernel fixes.
            extra_compile_args=["-O3", "-ffp-contract=fast"],
            optional=True,
        )
    ]
)
