"""How alike two heads attend: Jensen-Shannon divergence between their attention rows, and
the heads laid out in two dimensions by metric MDS (Clark et al. 2019, section 6)."""

from __future__ import annotations

import numpy as np


def js_divergence_sums(attention: np.ndarray, max_block: int = 1 << 22) -> np.ndarray:
    """[LH, LH] Jensen-Shannon divergence between heads' rows, summed over queries (nats).

    Clark et al. 2019 smooth each row as 0.999 A + 0.001/n. JS(p, q) = (sum p ln p +
    sum q ln q) / 2 - sum m ln m with m = (p + q) / 2, so only the m-term needs pairs;
    it is computed for blocks of heads against blocks of later heads (symmetry), at most
    `max_block` numbers at a time, each block smoothed as it is read, so long inputs stay in bounded
    memory. The pair term of a head with itself is its own sum p ln p, so taking the self terms from that
    diagonal makes identical heads cancel exactly; float32 halves the time, and its
    rounding (about 1e-6 nats per example) is far below the differences between heads.
    """
    layers, heads, length, _ = attention.shape
    count = layers * heads
    if isinstance(attention, np.ndarray):
        maps = attention.reshape(count, length, length)
        read = lambda first, stop: maps[first:stop]  # noqa: E731 - the two sources read alike
    else:  # a StoredAttention (a long input's), read from its file a block at a time
        read = attention.maps

    def smoothed(first: int, stop: int) -> np.ndarray:  # a block of heads at a time: never the whole model's copy
        return (0.999 * read(first, stop) + 0.001 / length).astype(np.float32)

    cross = np.zeros((count, count))
    block = max(1, max_block // (count * length * length))
    others = max(1, max_block // (block * length * length))
    for start in range(0, count, block):
        stop = min(start + block, count)
        rows = smoothed(start, stop)
        for first in range(start, count, others):
            last = min(first + others, count)
            mixture = (rows[:, None] + smoothed(first, last)[None]) * np.float32(0.5)  # [B, C, T, T]
            part = (mixture * np.log(mixture)).sum((2, 3), dtype=np.float64)
            cross[start:stop, first:last] = part
            cross[first:last, start:stop] = part.T
    self_term = np.diag(cross)
    return np.maximum(0.5 * (self_term[:, None] + self_term[None, :]) - cross, 0.0)


def classical_mds(dist: np.ndarray, dims: int = 2) -> np.ndarray:
    """Torgerson's classical scaling of a distance matrix, [n, dims]; signs fixed for stable output."""
    count = len(dist)
    centre = np.eye(count) - 1.0 / count
    gram = -0.5 * centre @ (dist ** 2) @ centre
    values, vectors = np.linalg.eigh(gram)
    order = np.argsort(values)[::-1][:dims]
    coords = np.zeros((count, dims))
    coords[:, : len(order)] = vectors[:, order] * np.sqrt(np.maximum(values[order], 0.0))
    flip = np.sign(coords[np.abs(coords).argmax(0), np.arange(coords.shape[1])])
    return coords * np.where(flip == 0, 1.0, flip)


def _layout_distances(coords: np.ndarray) -> np.ndarray:
    return np.sqrt(((coords[:, None] - coords[None, :]) ** 2).sum(-1))


def metric_mds(dist: np.ndarray, dims: int = 2, iterations: int = 300, tol: float = 1e-9) -> tuple[np.ndarray, float]:
    """Metric MDS by SMACOF (stress majorisation) from the classical solution; (coords, stress-1).

    Clark et al. lay the heads out with metric MDS; starting from classical scaling makes
    the result deterministic, and the Guttman transform only lowers the stress
    (de Leeuw 1977; Borg and Groenen, "Modern Multidimensional Scaling").
    """
    count = len(dist)
    coords = classical_mds(dist, dims)
    if count < 3 or not np.any(dist):
        return coords, 0.0
    stress = np.inf
    for _ in range(iterations):
        fitted = _layout_distances(coords)
        ratio = np.divide(dist, fitted, out=np.zeros_like(dist), where=fitted > 1e-12)
        guttman = -ratio  # B(X) of the Guttman transform X <- B(X) X / n
        np.fill_diagonal(guttman, 0.0)
        np.fill_diagonal(guttman, -guttman.sum(1))
        coords = guttman @ coords / count
        new = ((dist - _layout_distances(coords)) ** 2).sum() / 2
        if stress - new < tol * max(new, 1e-30):
            stress = new
            break
        stress = new
    return coords, float(np.sqrt(stress / max((dist ** 2).sum() / 2, 1e-30)))
