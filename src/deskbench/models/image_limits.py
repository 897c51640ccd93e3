"""A conversation's images made to fit a model's documented limits, so an episode never fails
on them: too large an image is downscaled (Lanczos, as MADQA's agents do), too many images drop
the oldest ones for a line of text saying so. Adapters call `fit_images` just before building
the wire body; requests within the limits pass through untouched (the same objects). The retry
wrapper (`ResilientModel`) fits a request once before its first try, in a worker thread
(`fit_request`): downscaling a many-image request is seconds of CPU, which on the event loop
would stall every other call and count against the call's timeout, and would be redone on
every retry; the adapter's own pass then finds everything within the limits.
"""

from __future__ import annotations

import base64
import io

from PIL import Image

from deskbench.corpus.images import DOWNSCALE_STEP, encode
from deskbench.models.capabilities import Capabilities
from deskbench.models.types import ChatRequest, ImagePart, Message, Part, TextPart

OMITTED = "[page image omitted: this model takes at most {n} images a request; the newest are kept]"


def _encoded_len(part: ImagePart) -> int:
    return len(part.data_b64)


def _fit_one(part: ImagePart, max_b64: int | None, max_side: int | None) -> ImagePart:
    """The image, downscaled until its base64 text is within max_b64 and its longer side within
    max_side. The byte limit is applied to the base64 text: Anthropic's 5 MB check is on what is
    sent, and MADQA's agent measures the same; it is the stricter reading either way."""
    too_big = max_b64 is not None and _encoded_len(part) > max_b64
    image: Image.Image | None = None
    if max_side is not None:
        image = Image.open(io.BytesIO(part.data))
        too_big = too_big or max(image.size) > max_side
    if not too_big:
        return part
    image = image or Image.open(io.BytesIO(part.data))
    image = image.convert("RGB") if image.mode not in ("RGB", "L") else image
    if max_side is not None and max(image.size) > max_side:
        scale = max_side / max(image.size)
        image = image.resize((max(1, int(image.width * scale)), max(1, int(image.height * scale))),
                             Image.Resampling.LANCZOS)
    data = encode(image, "png")
    while max_b64 is not None and len(base64.b64encode(data)) > max_b64 and min(image.size) > 32:
        image = image.resize((max(1, int(image.width * DOWNSCALE_STEP)), max(1, int(image.height * DOWNSCALE_STEP))),
                             Image.Resampling.LANCZOS)
        data = encode(image, "png")
    return ImagePart.of(data, "image/png", ref=part.ref).model_copy(update={"detail": part.detail})


def fit_images(messages: list[Message], caps: Capabilities) -> list[Message]:
    """`messages` within the model's image count, size and byte limits."""
    if (caps.max_images is None and caps.max_image_bytes is None and caps.max_image_side is None
            and (caps.many_images is None or caps.max_image_side_many is None)):
        return messages  # no limits: nothing to look for (the scan below walks the whole conversation)
    positions = [(i, j) for i, m in enumerate(messages) if isinstance(m.content, list)
                 for j, p in enumerate(m.content) if isinstance(p, ImagePart)]
    if not positions:
        return messages
    drop: set[tuple[int, int]] = set()
    if caps.max_images is not None and len(positions) > caps.max_images:
        drop = set(positions[: len(positions) - caps.max_images])
    kept = len(positions) - len(drop)
    max_side = caps.max_image_side
    if caps.many_images is not None and kept > caps.many_images and caps.max_image_side_many is not None:
        max_side = caps.max_image_side_many
    if not drop and caps.max_image_bytes is None and max_side is None:
        return messages
    out = list(messages)
    for i in sorted({i for i, _ in positions}):
        msg = messages[i]
        assert isinstance(msg.content, list)
        parts: list[Part] = []
        for j, part in enumerate(msg.content):
            if isinstance(part, ImagePart):
                if (i, j) in drop:
                    parts.append(TextPart(text=OMITTED.format(n=caps.max_images)))
                    continue
                part = _fit_one(part, caps.max_image_bytes, max_side)
            parts.append(part)
        if parts != msg.content:
            out[i] = msg.model_copy(update={"content": parts})
    return out


def fit_request(request: ChatRequest, caps: Capabilities) -> ChatRequest:
    """`request` with its images within `caps` (what the retry wrapper sends on every try)."""
    messages = fit_images(request.messages, caps)
    return request if messages is request.messages else request.model_copy(update={"messages": messages})
