"""--plot: step time against size, one line per mode, log axes (matplotlib, `plot` extra)."""

from __future__ import annotations

from aclcap.bench.run import BenchReport
from aclcap.errors import UsageError


def require_matplotlib() -> None:
    """Checked before the run: a missing extra must not cost the measurements."""
    try:
        import matplotlib  # noqa: F401
    except ImportError as exc:
        raise UsageError("--plot needs matplotlib: pip install 'aclcap[plot]'") from exc


def plot_bench(report: BenchReport, path: str) -> None:
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5), dpi=120)
    timed = [r for r in report.rows if not r.stale]
    for mode in dict.fromkeys(r.mode for r in timed):
        rows = sorted((r for r in timed if r.mode == mode), key=lambda r: r.size)
        label = f"{mode} ({rows[0].mechanism})" if mode == "graph" else mode
        ax.plot([r.size for r in rows], [r.step_median_us for r in rows], marker="o",
                label=label)
        ax.fill_between([r.size for r in rows], [r.step_median_us for r in rows],
                        [r.step_p90_us for r in rows], alpha=0.2)
    ax.set_xscale("log", base=2)
    sizes = sorted({r.size for r in report.rows})
    ax.set_xticks(sizes, [str(s) for s in sizes])
    ax.set_yscale("log")
    ax.set_xlabel("size (tokens per step)")
    ax.set_ylabel("step time (µs, median; band to p90)")
    ax.set_title(f"aclcap bench {report.model}: {report.device}, {report.dtype}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)
