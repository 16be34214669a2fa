"""Where the site's sources are: site_src/ and the base mkdocs.yml, inside the wheel or at the top of a checkout."""

from __future__ import annotations

from pathlib import Path

from reportgen.config import PACKAGE_DIR


def site_sources() -> tuple[Path, Path]:
    """(site_src directory, base mkdocs.yml): inside the wheel, or at the top of a checkout."""
    bundled = PACKAGE_DIR / "_site_src"
    if bundled.is_dir():
        return bundled, bundled / "mkdocs.yml"
    return PACKAGE_DIR.parent / "site_src", PACKAGE_DIR.parent / "mkdocs.yml"
