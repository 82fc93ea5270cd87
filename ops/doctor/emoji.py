"""Doctor checks of the Debian packages the emoji dataset is rendered from (ddm.ops.data.emoji_cache)
and captioned from (ddm.ops.data.emoji_captions)."""

from __future__ import annotations

from ddm.ops.doctor.checks import FAIL, OK, SKIP, Check


def emoji_sources() -> Check:
    """The emoji dataset's sources (fonts-noto-color-emoji, unicode-data) and Pillow's raqm layout. Only
    rendering the emoji needs them (a rendered cache loads without): missing is a skip naming the
    packages and the apt-get line; present but unusable (no raqm) is a FAIL."""
    from ddm.ops.data.emoji_cache import APT_INSTALL, SOURCE_FILES, missing_packages
    from ddm.ops.data.emoji_render import RAQM_FIX, require_raqm
    from ddm.schema.errors import ConfigError

    missing = missing_packages()
    if missing:
        detail = (
            f"missing {', '.join(missing)} (only rendering the emoji dataset needs them): `{APT_INSTALL}`"
        )
        return Check("emoji sources", SKIP, detail, APT_INSTALL)
    found = ", ".join(f"{pkg} ({path})" for pkg, path in SOURCE_FILES.items())
    try:
        require_raqm()  # the check rendering makes (ddm.ops.data.emoji_render)
    except ConfigError as exc:
        return Check("emoji sources", FAIL, f"{found}; {exc}", RAQM_FIX)
    return Check("emoji sources", OK, found)


def emoji_captions() -> Check:
    """The emoji captions' source: CLDR's English annotations (package unicode-cldr-core). Only captions
    need it: missing is a skip naming the package and the apt-get line; present but unreadable (not
    the XML expected) is a FAIL with the reader's error."""
    from ddm.ops.data.emoji_captions import CAPTIONS_APT, caption_sources, load_annotations
    from ddm.schema.errors import ConfigError

    try:
        paths = caption_sources()
    except ConfigError as exc:
        return Check("emoji captions", SKIP, f"{exc} (only the emoji captions need it)", CAPTIONS_APT)
    try:
        table = load_annotations(paths)
    except ConfigError as exc:
        return Check("emoji captions", FAIL, str(exc), CAPTIONS_APT.replace("install", "install --reinstall"))
    named = sum(a.name is not None for a in table.values())
    return Check("emoji captions", OK, f"{', '.join(map(str, paths))} ({named} names)")
