"""Markdown tables and the ratio chart, from the harness's cells."""

import statistics

MODE_TITLE = {"forward": "Forward", "grad": "Gradient (forward + backward)",
              "hessian": "Hessian (forward over reverse for myir)"}


def fmt(x):
    """3 significant digits or so: 0.42, 11.4, 8,139."""
    if x < 10:
        return f"{x:.2f}"
    if x < 100:
        return f"{x:.1f}"
    return f"{x:,.0f}"


def ratios(systems, cells, mode):
    """{label: {workload: ratio}} for each myir system against jax, handwritten, cpython.
    In gradient mode the cpython ratio divides by the cpython *forward* time."""
    time = {(c.workload, c.mode, c.system): c.median_us for c in cells if c.median_us}
    workloads = list(dict.fromkeys(c.workload for c in cells))
    out = {}
    for mine in (s for s in systems if s.startswith("myir-")):
        peers = [("jax", mode), ("handwritten", mode), ("cpython", "forward")]
        for peer, peer_mode in peers:
            if mode == "forward" and peer == "handwritten":
                continue
            label = f"{mine}/{peer}" + (" fwd" if peer_mode != mode else "")
            out[label] = {w: time[w, mode, mine] / time[w, peer_mode, peer] for w in workloads
                          if (w, mode, mine) in time and (w, peer_mode, peer) in time}
    return out


def markdown(meta, systems, cells):
    notes = {}  # footnote text -> number

    def cell_text(c):
        if c.status == "ok":
            return fmt(c.median_us)
        if c.status == "-":
            return "—"
        key = f"{c.system}: {c.reason}"
        return f"{c.status} [{notes.setdefault(key, len(notes) + 1)}]"

    lines = [f"# myir benchmark — {meta['date']}", "",
             f"{meta['machine']}; Python {meta['python']}; {meta['threads']} thread(s) for every "
             f"library; µs per call, median of {meta['samples']} interleaved samples of "
             f"~{meta['sample_ms']:g} ms (each the median of its timed calls; an empty call "
             f"costs {meta['empty_call_ns'] / 1e3:.2f} µs, not subtracted); "
             f"{meta.get('malloc', 'malloc: default')}.", ""]
    lines += [f"- {name}: {version}" for name, version in meta["versions"].items() if version]
    modes = list(dict.fromkeys(c.mode for c in cells))
    workloads = list(dict.fromkeys(c.workload for c in cells))
    by_key = {(c.workload, c.mode, c.system): c for c in cells}
    for mode in modes:
        rats = {label: r for label, r in ratios(systems, cells, mode).items() if r}
        lines += ["", f"## {MODE_TITLE[mode]}", "",
                  "| workload | " + " | ".join(systems + list(rats)) + " |",
                  "|---|" + "---:|" * (len(systems) + len(rats))]
        for w in workloads:
            row = [cell_text(by_key[w, mode, s]) for s in systems]
            row += [f"{r[w]:.2f}x" if w in r else "" for r in rats.values()]
            lines.append(f"| {w} | " + " | ".join(row) + " |")
        if not rats:
            lines += ["", "(No myir timings in this mode, so no ratio columns.)"]
    first = [c for c in cells if c.first_call_ms]
    if first:
        lines += first_call_table(first, by_key, workloads, modes, meta["firstcall_runs"])
    if notes:
        lines += ["", "Notes:", ""] + [f"{n}. {text}" for text, n in notes.items()]
    return "\n".join(lines) + "\n"


def first_call_table(first, by_key, workloads, modes, runs) -> list[str]:
    """Each system's first call; for myir, also with its program saved (`saved`), and the
    ratio of that to JAX's first call."""
    systems = list(dict.fromkeys(c.system for c in first))
    cols = [(s, "first_call_ms") for s in systems]
    cols += [(s, "first_call_saved_ms") for s in systems if s.startswith("myir")]
    names = [s + (" saved" if a == "first_call_saved_ms" else "") for s, a in cols]
    ratio_of = [(s, a) for s, a in cols if a == "first_call_saved_ms"] if "jax" in systems else []
    names += [f"{s} saved/jax" for s, _ in ratio_of]
    lines = ["", f"## First call, ms (compile + first run, median of {runs} fresh processes)",
             "", "`saved`: a program saved by an earlier process is loaded (myir/saved.py); "
             "otherwise the pipeline runs, with TVM's regions found in the disk cache.", "",
             "| workload | mode | " + " | ".join(names) + " |",
             "|---|---|" + "---:|" * len(names)]

    def median(system, workload, mode, attribute):
        times = getattr(by_key[workload, mode, system], attribute)
        return statistics.median(times) if times else None

    for w in workloads:
        for mode in modes:
            row = [median(s, w, mode, a) for s, a in cols]
            if not any(row):
                continue
            jax = median("jax", w, mode, "first_call_ms") if ratio_of else None
            ratios = [(m / jax if m and jax else None)
                      for m in (median(s, w, mode, a) for s, a in ratio_of)]
            lines.append(f"| {w} | {mode} | " + " | ".join(
                [fmt(t) if t else "" for t in row] +
                [f"{r:.3f}x" if r else "" for r in ratios]) + " |")
    return lines


def chart(systems, cells, path):
    """Bar chart of the myir ratios (log scale); returns a sentence saying what happened."""
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return "chart skipped: matplotlib is not installed (pip install matplotlib)"
    modes = list(dict.fromkeys(c.mode for c in cells))
    per_mode = {m: r for m in modes if any((r := ratios(systems, cells, m)).values())}
    if not per_mode:
        return "chart skipped: no myir timings, so no ratios to plot"
    workloads = list(dict.fromkeys(c.workload for c in cells))
    fig, axes = plt.subplots(len(per_mode), 1, figsize=(max(6, 1.1 * len(workloads)), 4 * len(per_mode)),
                             squeeze=False)
    for ax, (mode, rats) in zip(axes[:, 0], per_mode.items()):
        width = 0.8 / len(rats)
        for k, (label, values) in enumerate(rats.items()):
            xs = [i + (k - (len(rats) - 1) / 2) * width for i, w in enumerate(workloads) if w in values]
            ax.bar(xs, [values[w] for w in workloads if w in values], width, label=label)
        ax.axhline(1.0, color="black", linewidth=0.8)
        ax.set_yscale("log")
        timed = {w for values in rats.values() for w in values}
        ax.set_xticks(range(len(workloads)), [w if w in timed else f"{w} (no ratio)" for w in workloads],
                      rotation=30, ha="right")
        ax.set_ylabel("time ratio (lower is better for myir)")
        ax.set_title(MODE_TITLE[mode])
        ax.legend(fontsize="small")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return f"chart: {path}"
