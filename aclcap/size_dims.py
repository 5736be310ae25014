"""A dim of a step input that follows the step's size: the size itself (tokens), or an
affine function of it, `scale * size + offset`: vLLM's `query_start_loc` and a
`cu_seqlens` hold one more offset than the requests (`size + 1`), a graph's edge list
`k * size` entries. Found by calling make_inputs at several sizes
(loading/model_file.py); padded, cut back and exported by the same rule."""

from __future__ import annotations


class SizeDim(int):
    """The index of a dim that follows the size (an int, so every `t.narrow(d, ...)` and
    `t.shape[d]` reads it as before), with the rule its extent follows."""

    scale: int
    offset: int

    def __new__(cls, dim: int, scale: int = 1, offset: int = 0) -> SizeDim:
        new = super().__new__(cls, dim)
        new.scale, new.offset = scale, offset
        return new

    def extent(self, size: int) -> int:
        """The dim's length at `size`."""
        return self.scale * size + self.offset

    def size_of(self, extent: int) -> int:
        """The size a length of this dim stands for."""
        return (extent - self.offset) // self.scale

    @property
    def is_size(self) -> bool:
        return (self.scale, self.offset) == (1, 0)

    def __repr__(self) -> str:
        return int.__repr__(self) if self.is_size else \
            f"{int(self)}:{self.scale}*size{self.offset:+d}"

    def __reduce__(self) -> tuple:  # to a rank process and back, with its rule
        return SizeDim, (int(self), self.scale, self.offset)


def extent_of(dim: int, size: int) -> int:
    """The length of a size dim (a plain int dim is the size itself) at `size`."""
    return dim.extent(size) if isinstance(dim, SizeDim) else size


def size_from(dim: int, extent: int) -> int:
    """The size a length of a size dim stands for (rounded down)."""
    return dim.size_of(extent) if isinstance(dim, SizeDim) else extent


def sizes_within(dim: int, low: int, high: int | None) -> tuple[int, int | None]:
    """The sizes whose length of this dim lies in [low, high] (high None: unbounded)."""
    scale, offset = (dim.scale, dim.offset) if isinstance(dim, SizeDim) else (1, 0)
    return -(-(low - offset) // scale), None if high is None else (high - offset) // scale
